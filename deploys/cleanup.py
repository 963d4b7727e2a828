"""Pre-launch cleanup (`cleanup`): removes only what the facts found inside the declared
places, re-checking each path right before it goes, and says what it freed."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from pyinfra.api import deploy, operation

from gpurig.deploys.changes import apply
from gpurig.deploys.snapshot import read
from gpurig.facts.gpurig_cleanup import RAY_PROCESSES
from gpurig.plans import cleanup as plan
from gpurig.plans.change import Change

# A core file is still an ELF file right before it goes (a name alone proves nothing).
ELF = '[ "$(od -An -tx1 -N4 "$p" | tr -d " \\n")" = 7f454c46 ] && '


def _remove(paths: Sequence[str], freed: str, recursive: bool = False, also: str = "") -> str:
    """rm each path only if it is still what was found, checked in the same shell right before:
    a directory or regular file, not a symlink, in a parent directory reached without symlinks
    (so a name swapped or a parent replaced meanwhile is left alone)."""
    kind = "-d" if recursive else "-f"
    flags = "-rf" if recursive else "-f"
    checks = " ".join(
        f'p={shlex.quote(p)}; d=$(dirname -- "$p"); '
        f'if [ {kind} "$p" ] && [ ! -L "$p" ] && [ "$(cd -P -- "$d" 2>/dev/null && pwd)" = "$d" ]; '
        f'then {also}rm {flags} -- "$p"; fi;'
        for p in paths
    )
    return f"{checks} echo {shlex.quote(f'gpurig: freed {freed}')}"


def commands(change: Change) -> str:
    data = change.data
    if change.id == "cleanup.ray_sessions":
        stale = data["stale"]
        freed = f"{len(stale)} stale Ray sessions, {sum(stale.values())} KiB"
        return (
            f"if pgrep -f {shlex.quote(RAY_PROCESSES)} >/dev/null; "
            "then echo 'gpurig: Ray started meanwhile; /tmp/ray left alone'; "
            f"else {_remove(sorted(stale), freed, recursive=True)}; fi"
        )
    if change.id == "cleanup.core_files":
        files = data["files"]
        freed = f"{len(files)} core files, {sum(files.values())} bytes"
        return _remove(sorted(files), freed, also=ELF)
    if change.id == "cleanup.editable_finders":
        finders = data["finders"]
        paths = sorted({p for finder, pths in finders.items() for p in (finder, *pths)})
        return _remove(
            paths, f"{len(finders)} stale editable finders: {', '.join(sorted(finders))}"
        )
    cache = data["cache"]
    return _remove([cache["path"]], f"{plan.FLASHINFER_CACHE}, {cache['kib']} KiB", recursive=True)


@operation()
def leftovers(spec: dict[str, Any]):
    """Remove the leftovers the spec's cleanup names."""
    yield from apply(plan.plan(spec, read), "no leftovers to remove",
                     lambda change: [commands(change)])  # fmt: skip


@deploy("Pre-launch cleanup")
def cleanup(spec: dict[str, Any]) -> None:
    if any(spec["cleanup"].values()):
        leftovers(name="Remove leftovers", spec=spec)
