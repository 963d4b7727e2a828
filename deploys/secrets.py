"""Secrets (`secrets`): the value travels only as an upload from memory into a file that
already has its final mode, never in a command line, a diff, a log line or a report."""

from __future__ import annotations

from typing import Any

from pyinfra.api import OperationError, deploy, operation

from gpurig.deploys.changes import start
from gpurig.deploys.snapshot import read
from gpurig.deploys.writes import put
from gpurig.plans import secrets as plan
from gpurig.plans.secrets import local_bytes


@operation()
def secret_file(spec: dict[str, Any], dest: str):
    """Upload the secret at `dest` when its content, mode or owner differs. A wrong mode or
    owner is fixed by placing the file again (writes.put), never by `chmod`/`chown` on its
    path, which follow a link its directory's owner swapped in. A missing source anywhere
    refuses every secret: a typo changes nothing on the host."""
    changes = [c for c in plan.plan(spec, read) if c.refused or c.data.get("dest") == dest]
    if not start(changes, f"{dest} has its content, mode and owner"):
        return
    item = changes[0].data  # one secret: every change carries the same item
    try:
        data = local_bytes(item["src"])
    except OSError as exc:  # the message names the path, never content
        raise OperationError(f"secret source {item['src']}: {exc.strerror}") from None
    yield from put(data, item["dest"], item["mode"], item["owner"])


@deploy("Secrets")
def secrets(spec: dict[str, Any]) -> None:
    for item in spec["secrets"]:
        secret_file(name=f"Secret {item['dest']}", spec=spec, dest=item["dest"])
