"""Pre-launch cleanup (`spec.cleanup`): stale Ray sessions, core files, dead editable-install
finders and a stale FlashInfer JIT cache, the leftovers that fill a rented box's disk or break
the next launch (field notes 003: U6, U7). Only paths a fact found inside the declared places
are removed, each command says what it freed, and nothing found is a no-op."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from pyinfra import host
from pyinfra.api import deploy, operation

from facts.gpurig_cleanup import (
    RAY_PROCESSES,
    CoreFiles,
    EditableFinders,
    FlashinferCache,
    RaySessions,
)
from gpurig.inventory import repo_venv

FLASHINFER_CACHE = "~/.cache/flashinfer"


def _remove(paths: Sequence[str], freed: str, recursive: bool = False) -> str:
    listed = " ".join(shlex.quote(p) for p in paths)
    flags = "-rf" if recursive else "-f"
    return f"rm {flags} -- {listed} && echo {shlex.quote(f'gpurig: freed {freed}')}"


@operation()
def ray_sessions():
    """Remove /tmp/ray/session_* except the one session_latest points to, and only while no
    Ray process runs (checked again right before removing)."""
    found = host.get_fact(RaySessions)
    if found["running"]:
        host.noop(f"Ray is running ({found['running'][0]}): /tmp/ray left alone")
        return
    stale = {p: kib for p, kib in found["sessions"].items() if p != found["latest"]}
    if not stale:
        host.noop("no stale Ray sessions")
        return
    freed = f"{len(stale)} stale Ray sessions, {sum(stale.values())} KiB"
    yield (
        f"if pgrep -f {shlex.quote(RAY_PROCESSES)} >/dev/null; "
        "then echo 'gpurig: Ray started meanwhile; /tmp/ray left alone'; "
        f"else {_remove(sorted(stale), freed, recursive=True)}; fi"
    )


@operation()
def core_files(dirs: Sequence[str]):
    """Remove core files (ELF cores, by header) lying directly in `dirs`."""
    found = host.get_fact(CoreFiles, dirs=list(dirs))
    if not found:
        host.noop(f"no core files in {', '.join(dirs)}")
        return
    yield _remove(sorted(found), f"{len(found)} core files, {sum(found.values())} bytes")


@operation()
def editable_finders(venvs: Sequence[str]):
    """Remove editable-install finders (and the .pth files loading them) whose source
    directories are gone: they make every `import` of the package fail or pick stale code."""
    found = host.get_fact(EditableFinders, venvs=list(venvs))
    if not found:
        host.noop("no stale editable finders")
        return
    paths = sorted({p for finder, pths in found.items() for p in (finder, *pths)})
    yield _remove(paths, f"{len(found)} stale editable finders: {', '.join(sorted(found))}")


def flashinfer_stale(found: dict[str, Any]) -> bool:
    """A JIT cache is stale when flashinfer is gone or was installed after the cache's last
    write: kernels built against another version load and crash or miscompute."""
    cache = found["cache"]
    if cache is None:
        return False
    installed = found["installed"].values()
    return not installed or cache["mtime"] < max(installed)


@operation()
def flashinfer_cache(pythons: Sequence[str]):
    """Remove ~/.cache/flashinfer when it is older than the flashinfer `pythons` import, or
    none of them has flashinfer."""
    found = host.get_fact(FlashinferCache, pythons=list(pythons))
    if not flashinfer_stale(found):
        host.noop(f"{FLASHINFER_CACHE} is absent or current")
        return
    cache = found["cache"]
    yield _remove([cache["path"]], f"{FLASHINFER_CACHE}, {cache['kib']} KiB", recursive=True)


@deploy("Pre-launch cleanup")
def cleanup(spec: dict[str, Any]) -> None:
    wanted = spec.get("cleanup") or {}
    repos = spec.get("repos") or {}
    venvs = [v for path, r in repos.items() if (v := repo_venv(path, r))]
    if wanted.get("ray_sessions"):
        ray_sessions(name="Remove stale Ray sessions")
    if wanted.get("core_files"):
        core_files(name="Remove core files", dirs=[*repos, "/tmp"])
    if wanted.get("editable_finders") and venvs:
        editable_finders(name="Remove stale editable finders", venvs=venvs)
    if wanted.get("flashinfer_cache"):
        pythons = [*(f"{v}/bin/python" for v in venvs), "python3"]
        flashinfer_cache(name="Remove a stale FlashInfer JIT cache", pythons=pythons)
