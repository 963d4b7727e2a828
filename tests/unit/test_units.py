"""Sizes: what the inventory accepts, what reports print, and one pattern shared with the schema."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from gpurig.spec.inventory import schema
from gpurig.spec.units import SIZE_PATTERN, format_size, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512g", 512 * 1024**3),
        ("64M", 64 * 1024**2),
        ("1.5t", 3 * 1024**4 // 2),
        ("8k", 8192),
        ("0g", 0),
        ("0.000001k", 0),  # a part of a byte is no byte
        ("2.000001k", 2048),
        ("999999999999.999999t", 999999999999999999 * 1024**4 // 10**6),
    ],
)
def test_parse_size_uses_binary_units(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["512", "g", "12 gb", "-1g", "1.g", "10p", "", "1g\n"])
def test_parse_size_refuses_what_is_not_a_size(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (64 * 1024**2, "64 MiB"),
        (512 * 1024**3, "512 GiB"),
        (3 * 1024**4 // 2, "1.5 TiB"),
        (2048 * 1024**5, "2048 PiB"),
    ],
)
def test_format_size_prints_binary_units(size: int, text: str) -> None:
    assert format_size(size) == text


def test_the_schema_accepts_exactly_what_parse_size_accepts() -> None:
    assert schema()["$defs"]["size"]["pattern"] == SIZE_PATTERN


def test_units_imports_nothing_from_outside_the_standard_library() -> None:
    """The judges import sizes from here so that they need not load the inventory's validator."""
    code = "import sys, gpurig.spec.units; print(' '.join(sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(proc.stdout.split())
    # The interpreter's start-up hooks (Debian's python3 ships a sitecustomize) are not gpurig's.
    started = {*sys.stdlib_module_names, "__main__", "sitecustomize", "usercustomize"}
    third_party = sorted(m for m in loaded - started if "." not in m)
    assert third_party == ["gpurig"]


@pytest.mark.parametrize(
    "text",
    ["1g", "1.5T", "0k", "1.g", ".5g", "1..5g", "1.5.5g", "1234567890123g", "123456789012g",
     "1.1234567g", "1.123456g", "1g\n", "\n1g", "g", "", "1", "\u0661g", "1.\u0661g", "1e3g", "+1g",
     " 1g", "1 g", "1gg", "1.5"],
)  # fmt: skip
def test_is_size_is_the_schema_pattern(text: str) -> None:
    from gpurig.spec.units import is_size

    assert is_size(text) == bool(re.search(SIZE_PATTERN, text))
