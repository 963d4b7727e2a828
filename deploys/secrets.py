"""Secrets (`secrets`): the value travels only as an upload from memory into a file that
already has its final mode, never in a command line, a diff, a log line or a report."""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra.api import OperationError, deploy, operation

from deploys.changes import start
from deploys.snapshot import read
from deploys.writes import put
from gpurig.plans import secrets as plan
from gpurig.plans.secrets import local_path


@operation()
def secret_files(spec: dict[str, Any]):
    """Upload each secret whose content differs; fix mode and owner in place otherwise."""
    changes = plan.plan(spec, read)
    if not start(changes, "every secret has its content, mode and owner"):
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
    if spec["secrets"]:
        secret_files(spec=spec)
