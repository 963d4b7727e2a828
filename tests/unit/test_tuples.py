"""Records as named tuples: their dict form is what `dataclasses.asdict` gave the facts, and a
lazy pattern behaves as the compiled one."""

from __future__ import annotations

import re
from typing import NamedTuple

from gpurig.read.gpu_parse import parse_smi_list
from gpurig.spec.pattern import lazy
from gpurig.spec.tuples import asdict
from tests.unit.gpu_fixtures import read_fixture


class Inner(NamedTuple):
    name: str


class Outer(NamedTuple):
    inner: Inner
    listed: list[Inner]
    kept: tuple[Inner, ...]
    mapped: dict[str, Inner]
    plain: int = 1


def test_nested_records_become_dicts_and_containers_keep_their_kind() -> None:
    record = Outer(Inner("a"), [Inner("b")], (Inner("c"),), {"d": Inner("d")})
    assert asdict(record) == {
        "inner": {"name": "a"},
        "listed": [{"name": "b"}],
        "kept": ({"name": "c"},),
        "mapped": {"d": {"name": "d"}},
        "plain": 1,
    }
    assert type(asdict(record)["kept"]) is tuple


def test_a_gpu_listing_s_mig_devices_are_dicts_as_the_facts_store_them() -> None:
    listing = parse_smi_list(
        read_fixture("nvidia-smi-L_a100-sxm4-80gb-x4_mig-on-gpu0_535.54.03.txt")
    )
    first = asdict(listing[0])
    assert first["mig"] and all(isinstance(m, dict) for m in first["mig"])


def test_a_lazy_pattern_matches_as_the_compiled_one() -> None:
    text, source = "Xid 79 on 0000:3b:00.0", r"Xid (?P<xid>\d+)"
    pattern = lazy(source, re.I)
    assert pattern.search(text)["xid"] == re.compile(source, re.I).search(text)["xid"]
    assert pattern.pattern == source and pattern.flags & re.I
