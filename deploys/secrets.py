"""Secrets (`secrets`): the value travels only as an upload from memory into a file that
already has its final mode, never in a command line, a diff, a log line or a report."""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra.api import OperationError, deploy, operation

from gpurig.deploys.changes import start
from gpurig.deploys.snapshot import read
from gpurig.deploys.writes import put
from gpurig.plans import secrets as plan
from gpurig.plans.secrets import local_path


@operation()
def secret_file(spec: dict[str, Any], dest: str):
    """Upload the secret at `dest` if its content differs; fix mode and owner otherwise. A
    missing source anywhere refuses every secret: a typo changes nothing on the host."""
    changes = [c for c in plan.plan(spec, read) if c.refused or c.data.get("dest") == dest]
    if not start(changes, f"{dest} has its content, mode and owner"):
        return
    for change in changes:
        item = change.data
        q = shlex.quote(item["dest"])
        if change.id in ("secret.missing", "secret.content"):
            try:
                data = local_path(item["src"]).read_bytes()
            except OSError as exc:  # the message names the path, never content
                raise OperationError(f"secret source {item['src']}: {exc.strerror}") from None
            yield from put(data, item["dest"], item["mode"], item["owner"])
        elif change.id == "secret.mode":
            yield f"chmod {item['mode']} {q}"
        elif change.id == "secret.owner":
            yield f"chown {shlex.quote(item['owner'])} {q}"


@deploy("Secrets")
def secrets(spec: dict[str, Any]) -> None:
    for item in spec["secrets"]:
        secret_file(name=f"Secret {item['dest']}", spec=spec, dest=item["dest"])
