"""Pre-launch cleanup (`cleanup`): stale Ray sessions, core files, dead editable-install finders
and a stale FlashInfer JIT cache, the leftovers that fill a rented box's disk or break the next
launch (a full disk, or inodes run out before bytes do). Advice (`warn`): the next converge
removes them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpurig.facts.gpurig_cleanup import CoreFiles, EditableFinders, FlashinferCache, RaySessions
from gpurig.facts.gpurig_user import UserCoreFiles, UserRaySessions
from gpurig.plans.change import Change
from gpurig.spec.finding import Severity
from gpurig.spec.user_scope import is_user
from gpurig.spec.words import counted

FLASHINFER_CACHE = "~/.cache/flashinfer"
IDS = (
    "cleanup.ray_sessions", "cleanup.core_files", "cleanup.editable_finders",
    "cleanup.flashinfer_cache",
)  # fmt: skip
# Advice: what it finds is removed by the next converge, nothing the spec declares is wrong.
SEVERITY: Severity = "warn"


def venvs(spec: Mapping[str, Any]) -> list[str]:
    return [r["python"]["venv"] for r in spec["repos"].values() if r.get("python")]


def flashinfer_stale(found: Mapping[str, Any]) -> bool:
    """A JIT cache is stale when flashinfer is gone or was installed after the cache's last
    write: kernels built against another version load and crash or miscompute."""
    cache = found["cache"]
    if cache is None:
        return False
    installed = found["installed"].values()
    return not installed or cache["mtime"] < max(installed)


def _change(change_id: str, subject: str, actual: str, action: str, **data: Any) -> Change:
    return Change(change_id, subject, "none", actual, action, severity=SEVERITY, data=data)


def plan(spec: Mapping[str, Any], read: Callable[..., Any]) -> list[Change]:
    wanted, envs = spec["cleanup"], venvs(spec)
    changes = []
    user = is_user(spec)  # a user's own leftovers in the places others share
    if wanted.get("ray_sessions"):
        ray = read(UserRaySessions if user else RaySessions)
        stale = {p: k for p, k in ray["sessions"].items() if p != ray["latest"]}
        if stale and not ray["running"]:
            changes.append(
                _change(
                    "cleanup.ray_sessions",
                    "/tmp/ray",
                    f"{counted(len(stale), 'stale session')}, {sum(stale.values())} KiB",
                    "remove the stale Ray sessions",
                    stale=stale,
                )
            )
    if wanted.get("core_files"):
        cores = read(UserCoreFiles if user else CoreFiles, dirs=[*spec["repos"], "/tmp"])
        if cores:
            changes.append(
                _change(
                    "cleanup.core_files",
                    ", ".join(sorted(cores)),
                    f"{counted(len(cores), 'core file')}, {counted(sum(cores.values()), 'byte')}",
                    "remove the core files",
                    files=cores,
                )
            )
    if wanted.get("editable_finders") and envs:
        finders = read(EditableFinders, venvs=envs)
        if finders:
            changes.append(
                _change(
                    "cleanup.editable_finders",
                    ", ".join(sorted(finders)),
                    f"{counted(len(finders), 'finder')} of deleted sources",
                    "remove the stale editable finders",
                    finders=finders,
                )
            )
    if wanted.get("flashinfer_cache"):
        found = read(FlashinferCache, pythons=[*(f"{v}/bin/python" for v in envs), "python3"])
        if flashinfer_stale(found):
            changes.append(
                _change(
                    "cleanup.flashinfer_cache",
                    FLASHINFER_CACHE,
                    f"stale, {found['cache']['kib']} KiB",
                    f"remove {FLASHINFER_CACHE}",
                    cache=found["cache"],
                )
            )
    return changes
