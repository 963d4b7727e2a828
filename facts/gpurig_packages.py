"""Debian packages: installed version and hold of each named package, from one dpkg-query
(dpkg's own selection state says `hold`; apt-mark would load apt's whole cache to say it); and
the release they come from (the running kernel, /etc/os-release), which the plans choose
packages for and the checks judge."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from gpurig.facts.reader import Reader
from gpurig.facts.round_trip import LINES, Sectioned, part_text
from gpurig.spec.pattern import lazy

# One line of the dpkg-query below: name (with `:arch` where dpkg needs it), version (empty
# when not installed), db:Status-Abbrev (desired, status, error flag).
_ROW = lazy(
    r"(?P<name>[a-z0-9][a-z0-9+.-]+(?::[a-z0-9-]+)?)\t"
    r"(?P<version>(?:[0-9]+:)?[0-9][A-Za-z0-9.+~:-]*|)\t"
    r"(?P<status>[uihrp][ncHUFWti][ R]?)"
)


def _query(field: str, names: Sequence[str]) -> str:
    quoted = " ".join(shlex.quote(n) for n in names)
    form = f"{field}\\t${{Version}}\\t${{db:Status-Abbrev}}\\n"
    return f"dpkg-query -W -f='{form}' -- {quoted} 2>/dev/null; true"


def _rows(output: list[str]) -> dict[str, Any]:
    """Names are later put on command lines (holds): a line that is not a package name, a
    version and a status is refused, never passed on. `rc` (removed, config left) is not
    installed."""
    packages: dict[str, Any] = {}
    for line in output:
        row = _ROW.fullmatch(line.rstrip(" "))
        if row is None:
            raise ValueError(f"unexpected dpkg-query line: {line[:80]!r}")
        installed = row["status"][1] == "i" and bool(row["version"])
        packages[row["name"]] = {
            "version": row["version"] if installed else None,
            "held": row["status"][0] == "h",
        }
    return packages


class DebStatus(Reader[dict[str, Any]]):
    """{name: {"version": installed version or None, "held": bool}} for those of `packages`
    dpkg knows."""

    @staticmethod
    def default() -> dict[str, Any]:
        return {}

    def command(self, packages: Sequence[str]) -> str:
        return _query("${Package}", packages)

    def process(self, output: list[str]) -> dict[str, Any]:
        return _rows(output)


# One line of DebProviders' query: a name, then the installed package that provides it.
_PROVIDED = lazy(r"(?P<name>[a-z0-9][a-z0-9+.-]+)\tprovided by (?P<by>[a-z0-9][a-z0-9+.-]+)")


class DebProviders(Reader[dict[str, str]]):
    """{name: installed package that Provides it} (Docker's containerd.io provides containerd
    and runc): apt removes that package to install the name itself, so the name counts as
    installed. One read for every concern (about a hundred lines on a cloud image), so the
    round trip runs one dpkg-query for it, whatever the spec asks for."""

    @staticmethod
    def default() -> dict[str, str]:
        return {}

    def command(self) -> str:
        form = "${db:Status-Abbrev}\\t${Package}\\t${Provides}\\n"
        return (
            f"dpkg-query -W -f='{form}' 2>/dev/null | awk -F'\\t' "
            '\'$1 ~ /^.i/ && $3 != "" { n = split($3, p, /, */); for (i = 1; i <= n; i++) { '
            'sub(/ .*/, "", p[i]); print p[i] "\\tprovided by " $2 } }\'; true'
        )

    def process(self, output: list[str]) -> dict[str, str]:
        # Only compared with names the spec and the tables give, never put on a command
        # line: a line of another shape names nothing gpurig asks for, and is passed over.
        rows = (_PROVIDED.fullmatch(line.rstrip(" ")) for line in output)
        return {row["name"]: row["by"] for row in reversed([r for r in rows if r])}


class DriverPackages(Reader[dict[str, Any]]):
    """DebStatus for every package matching one of `globs` (dpkg-query matches them itself),
    named with `:arch` where dpkg does, so a hold reaches each architecture's instance."""

    @staticmethod
    def default() -> dict[str, Any]:
        return {}

    def command(self, globs: Sequence[str]) -> str:
        return _query("${binary:Package}", globs)

    def process(self, output: list[str]) -> dict[str, Any]:
        return _rows(output)


class OsRelease(Sectioned[dict[str, Any]]):
    """The running kernel and /etc/os-release's ID, VERSION_ID and PRETTY_NAME."""

    def command(self) -> str:
        return self.sectioned(
            {"kernel": f"{LINES}\ngpurig_lines /proc/sys/kernel/osrelease 2>/dev/null",
             "os": f"{LINES}\ngpurig_lines /etc/os-release 2>/dev/null"}
        )  # fmt: skip

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        fields = {}
        for line in (parts.get("os") or "").splitlines():
            key, sep, value = line.partition("=")
            if sep and re.fullmatch(r"[A-Z0-9_]+", key):
                fields[key] = value.strip().strip("\"'") or None
        return {
            "kernel": part_text(parts, "kernel"),
            "os_id": fields.get("ID"),
            "os_version": fields.get("VERSION_ID"),
            "os_pretty": fields.get("PRETTY_NAME"),
        }
