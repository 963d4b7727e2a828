"""Debian packages: the spec's own, and the tools other concerns need."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from facts.gpurig_packages import DebStatus
from gpurig.change import Change


def missing(names: Sequence[str], read: Callable[..., Any], why: str = "") -> list[Change]:
    """`packages.missing` for those of `names` that are not installed."""
    if not names:
        return []
    state = read(DebStatus, packages=sorted(set(names)))
    absent = [n for n in names if not (state.get(n) or {}).get("version")]
    if not absent:
        return []
    listed = ", ".join(absent)
    return [
        Change(
            "packages.missing",
            f"packages {listed}{f' ({why})' if why else ''}",
            "installed",
            "not installed",
            f"install {listed} with apt",
            data={"packages": absent},
        )
    ]


def plan(spec: Mapping[str, Any], read: Callable[..., Any]) -> list[Change]:
    return missing(spec["packages"], read)
