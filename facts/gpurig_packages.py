"""Debian packages: installed version and hold of each named package, from one dpkg-query
(dpkg's own selection state says `hold`; apt-mark would load apt's whole cache to say it)."""

from __future__ import annotations

import re
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


# One line of DriverPackages' query: name (with `:arch` where dpkg needs it), version (empty
# when not installed), db:Status-Abbrev (desired, status, error flag).
_DRIVER_ROW = re.compile(
    r"(?P<name>[a-z0-9][a-z0-9+.-]+(?::[a-z0-9-]+)?)\t"
    r"(?P<version>(?:[0-9]+:)?[0-9][A-Za-z0-9.+~:-]*|)\t"
    r"(?P<status>[uihrp][ncHUFWti][ R]?)"
)


class DriverPackages(FactBase[dict[str, Any]]):
    """{name: {"version", "held"}} for every package dpkg knows that matches one of `globs`
    (dpkg-query matches them itself), named with `:arch` where dpkg does, so a hold reaches
    each architecture's instance. Names are later put on a command line: a line that is not a
    package name, a version and a status is refused, never passed on."""

    @staticmethod
    def default() -> dict[str, Any]:
        return {}

    def command(self, globs: Sequence[str]) -> str:
        patterns = " ".join(shlex.quote(g) for g in globs)
        return (
            "dpkg-query -W -f='${binary:Package}\\t${Version}\\t${db:Status-Abbrev}\\n' -- "
            f"{patterns} 2>/dev/null; true"
        )

    def process(self, output: list[str]) -> dict[str, Any]:
        packages: dict[str, Any] = {}
        for line in output:
            row = _DRIVER_ROW.fullmatch(line.rstrip(" "))
            if row is None:
                raise ValueError(f"unexpected dpkg-query line: {line[:80]!r}")
            installed = row["status"][1] == "i" and bool(row["version"])
            packages[row["name"]] = {
                "version": row["version"] if installed else None,
                "held": row["status"][0] == "h",
            }
        return packages
