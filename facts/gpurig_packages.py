"""Debian packages: installed version and hold of each named package, one dpkg-query."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from pyinfra.api import FactBase

HELD = "--gpurig-held"


class DebStatus(FactBase[dict[str, Any]]):
    """{name: {"version": installed version or None, "held": bool}} for `packages`. A package
    in dpkg state `rc` (removed, config left) is not installed."""

    @staticmethod
    def default() -> dict[str, Any]:
        return {}

    def command(self, packages: Sequence[str]) -> str:
        names = " ".join(shlex.quote(p) for p in packages)
        return (
            "dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' -- "
            f"{names} 2>/dev/null; echo {HELD}; apt-mark showhold 2>/dev/null; true"
        )

    def process(self, output: list[str]) -> dict[str, Any]:
        held_at = output.index(HELD) if HELD in output else len(output)
        held = {line.strip() for line in output[held_at + 1 :]}
        packages: dict[str, Any] = {}
        for line in output[:held_at]:
            name, version, status = [*line.split("\t"), "", ""][:3]
            installed = len(status) > 1 and status[1] == "i"
            packages[name] = {"version": version if installed else None, "held": name in held}
        for name in held - packages.keys():
            packages[name] = {"version": None, "held": True}
        return packages
