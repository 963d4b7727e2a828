"""Debian packages: installed version and hold of each named package, from one dpkg-query
(dpkg's own selection state says `hold`; apt-mark would load apt's whole cache to say it)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from pyinfra.api import FactBase


class DebStatus(FactBase[dict[str, Any]]):
    """{name: {"version": installed version or None, "held": bool}} for those of `packages`
    dpkg knows. A package in state `rc` (removed, config left) is not installed."""

    @staticmethod
    def default() -> dict[str, Any]:
        return {}

    def command(self, packages: Sequence[str]) -> str:
        names = " ".join(shlex.quote(p) for p in packages)
        return (
            "dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' -- "
            f"{names} 2>/dev/null; true"
        )

    def process(self, output: list[str]) -> dict[str, Any]:
        packages: dict[str, Any] = {}
        for line in output:
            name, version, status = [*line.split("\t"), "", ""][:3]
            installed = len(status) > 1 and status[1] == "i"
            packages[name] = {"version": version if installed else None, "held": status[:1] == "h"}
        return packages
