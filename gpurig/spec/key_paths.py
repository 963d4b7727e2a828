"""Where an inventory's private key paths lead: the same inventory runs on a laptop and in CI,
so a key is best written under the user's home (`~/...`), and one missing here makes its host
unreachable here. Both are warnings of `validate`: the inventory is valid either way."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from gpurig.spec.inventory import Host


def home_relative(path: str, home: str) -> str:
    """`path` as `~/...` where it lies under `home` (a shell expands `--key ~/.ssh/k` before
    gpurig sees it); any other path unchanged."""
    full = os.path.abspath(os.path.expanduser(path))
    inside = os.path.relpath(full, home)
    if inside == "." or inside.startswith(os.pardir + os.sep) or inside == os.pardir:
        return path
    return f"~/{inside}"


def repository(start: Path) -> Path:
    """The checkout holding `start` (the nearest directory with `.git`), else its directory."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return start


def _keys(host: Host) -> Iterator[tuple[str, str]]:
    if host.ssh.key:
        yield "ssh.key", host.ssh.key
    jump = host.ssh.jump
    if jump and jump.key and jump.key != host.ssh.key:  # the host's own unless it names one
        yield "ssh.jump.key", jump.key


def key_warnings(hosts: Sequence[Host]) -> list[str]:
    """One line per key path that is absolute outside the inventory's repository (found on
    this machine only), and per key file missing here; a key many hosts share (the defaults')
    is said once, at its first host, with how many others use it."""
    found: dict[tuple[str, str], list[str]] = {}
    for host in hosts:
        where = f"{host.source}:{host.line}: hosts.{host.name}"
        root = repository(Path(host.source).resolve().parent)
        for field, key in _keys(host):
            full = Path(os.path.expanduser(key))
            if key.startswith("/") and not full.resolve().is_relative_to(root):
                said = (
                    f"{key} is an absolute path outside this repository, so another machine "
                    "(a CI runner) looks for it there: write it under the home as ~/... (each "
                    "machine's own)"
                )
                found.setdefault((field, said), []).append(where)
            if not full.is_file():
                said = (
                    f"no private key file at {full} on this machine: drift reports the host "
                    "unreachable and the converge cannot log in from here"
                )
                found.setdefault((field, said), []).append(where)
    return [
        f"{wheres[0]}.{field}: {said}"
        + (f" (and {len(wheres) - 1} other hosts)" if len(wheres) > 1 else "")
        for (field, said), wheres in found.items()
    ]
