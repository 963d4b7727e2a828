"""Core dumps off (`core_dumps: disabled`): gpurig's limit files, written or removed."""

from __future__ import annotations

from typing import Any

from pyinfra.api import deploy, operation

from deploys.changes import apply
from deploys.snapshot import read
from deploys.writes import put, remove
from gpurig.change import Change
from gpurig.plans import core_dumps as plan


def write(change: Change):
    """The commands for a managed-file change: write it whole, or remove it."""
    if change.data["content"] is None:
        yield remove(change.data["path"])
    else:
        yield from put(change.data["content"].encode(), change.data["path"], change.data["mode"])


@operation()
def core_dump_files(spec: dict[str, Any]):
    """Write (or, with core dumps enabled, remove) gpurig's core dump limit files."""
    yield from apply(plan.plan(spec, read), "core dump limit files as declared", write)


@deploy("Core dumps")
def core_dumps(spec: dict[str, Any]) -> None:
    core_dump_files(name="Core dump limit files", spec=spec)
