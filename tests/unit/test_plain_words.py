"""Words a reader can resolve: what gpurig ships and shows (the package, its facts and deploys,
the docs, the README, the example inventories, the benchmarks) names no internal issue by
number, no private notes ("field notes 003 U22") and no machine by a nickname ("the lent
H100"): each says the reason, the failure in plain words, or a public source (an upstream
issue is cited with its repository and #number)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("gpurig", "facts", "deploys", "docs", "benchmarks", "inventories", "examples",
           "schemas", "README.md", "inventory.py")  # fmt: skip
SUFFIXES = {".py", ".yaml", ".yml", ".md", ".sh", ".json", ".toml"}
UNRESOLVABLE = {
    # "issue 28", "Issue 26 item 2": a tracker the reader does not have (public: "#629").
    "an internal issue number": re.compile(r"\b[Ii]ssues? \d+"),
    "private notes": re.compile(r"\b[Ff]ield notes?\b|\bU\d{1,2}\b(?=[:,) ])"),
    "a machine's nickname": re.compile(r"\blent\b[ -]H100|\bthe lent\b"),
}


def shipped_files() -> list[Path]:
    found = []
    for name in SHIPPED:
        top = ROOT / name
        paths = [top] if top.is_file() else sorted(top.rglob("*"))
        found += [p for p in paths if p.is_file() and p.suffix in SUFFIXES
                  and "__pycache__" not in p.parts]  # fmt: skip
    return found


def unresolvable(text: str) -> list[str]:
    return [f"{what}: {m.group(0)!r}" for what, pattern in UNRESOLVABLE.items()
            for m in pattern.finditer(text)]  # fmt: skip


def test_shipped_text_says_the_reason_not_a_pointer() -> None:
    files = shipped_files()
    assert len(files) > 100
    found = {
        str(path.relative_to(ROOT)): said
        for path in files
        if (said := unresolvable(path.read_text(encoding="utf-8", errors="replace")))
    }
    assert found == {}


@pytest.mark.parametrize(
    ("text", "caught"),
    [
        ("which was most of what a contract cost beside NHC (issue 28).", True),
        ('"""Issue 26 item 2: dest was written', True),
        ("Field notes 003 U22: Xid 79 is a hardware fault", True),
        ("(field notes 003, U30: a tag is not an image)", True),
        ("# The lent H100's recordings", True),
        ("source: NVIDIA/nccl@issue #629 https://github.com/NVIDIA/nccl/issues/629", False),
        ("Xid 79 is a hardware fault, not a code bug", False),
    ],
)
def test_the_patterns_catch_pointers_and_leave_public_sources(text: str, caught: bool) -> None:
    assert bool(unresolvable(text)) == caught
