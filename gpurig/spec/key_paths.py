"""Where an inventory's private key paths lead: the same inventory runs on a laptop and in CI,
so a key is best written under the user's home (`~/...`), and one missing here makes its host
unreachable here. Both are warnings of `validate`: the inventory is valid either way."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path

from gpurig.spec.inventory import Host
from gpurig.spec.words import counted


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


def _key_problems(key: str, root: Path) -> list[str]:
    """What is wrong with private key path `key` for an inventory in repository `root`."""
    full = Path(os.path.expanduser(key))
    problems = []
    if key.startswith("/") and not full.resolve().is_relative_to(root):
        problems.append(
            f"{key} is an absolute path outside this repository, so another machine "
            "(a CI runner) looks for it there: write it under the home as ~/... (each "
            "machine's own)"
        )
    if not full.is_file():
        problems.append(
            f"no private key file at {full} on this machine: drift reports the host "
            "unreachable and the converge cannot log in from here"
        )
    return problems


def key_warnings(hosts: Sequence[Host]) -> list[str]:
    """One line per key path that is absolute outside the inventory's repository (found on
    this machine only), and per key file missing here; a key many hosts share (the defaults')
    is said once, at its first host, with how many others use it. Each file's repository and
    each key are looked at once (a fleet of thousands shares a few)."""
    root_of = cache(lambda source: repository(Path(source).resolve().parent))
    problems = cache(_key_problems)
    found: dict[tuple[str, str], list[str]] = {}
    for host in hosts:
        where = f"{host.source}:{host.line}: hosts.{host.name}"
        for field, key in _keys(host):
            for said in problems(key, root_of(host.source)):
                found.setdefault((field, said), []).append(where)
    return [
        f"{wheres[0]}.{field}: {said}"
        + (f" (and {counted(len(wheres) - 1, 'other host')})" if len(wheres) > 1 else "")
        for (field, said), wheres in found.items()
    ]
