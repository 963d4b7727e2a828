"""Core dumps off (`core_dumps: disabled`): gpurig's limit files, written or removed."""

from __future__ import annotations

from typing import Any

from pyinfra.api import deploy, operation

from gpurig.deploys.changes import apply
from gpurig.deploys.snapshot import read
from gpurig.deploys.writes import put, put_home, remove, write_block
from gpurig.plans import core_dumps as plan
from gpurig.plans.change import Change
from gpurig.spec.user_scope import is_user


def write(change: Change):
    """The commands for a managed-file change: write it whole, or remove it; a block of the
    user's login file (scope: user) rewritten, or removed."""
    data = change.data
    if "block" in data:
        yield write_block(data["block"], data["lines"])
    elif data["content"] is None:
        yield remove(data["path"])
    elif data["path"].startswith("~/"):
        yield put_home(data["content"], data["path"], data["mode"])
    else:
        yield from put(data["content"].encode(), data["path"], data["mode"])


@operation()
def core_dump_files(spec: dict[str, Any]):
    """Write (or, with core dumps enabled, remove) gpurig's core dump limit files, or its
    block in the user's login file (scope: user)."""
    yield from apply(plan.plan(spec, read), "core dump limit files as declared", write)


@deploy("Core dumps")
def core_dumps(spec: dict[str, Any]) -> None:
    where = "in the user's login profile" if is_user(spec) else "files"
    core_dump_files(name=f"Core dump limit {where}", spec=spec)
