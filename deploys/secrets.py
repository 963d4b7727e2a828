"""Secrets (`spec.secrets`): files copied from the machine running gpurig, mode 0600 unless
declared. The value travels only as an SFTP upload from memory, never in a command line,
a diff, a log line, a report or an exception; the host's copy is compared by sha256."""

from __future__ import annotations

import hashlib
import os
import shlex
from io import BytesIO
from pathlib import Path, PurePosixPath
from typing import Any

from pyinfra import host
from pyinfra.api import DeployError, FileUploadCommand, OperationError, deploy, operation

from facts.gpurig_secret import SecretFile


def local_path(src: str) -> Path:
    """Where a secret's `src` is on this machine (~ expanded)."""
    return Path(os.path.expanduser(src))


@operation()
def secret(src: str, dest: str, mode: str = "0600", owner: str | None = None):
    """Upload `src` to `dest` when its sha256 differs; fix mode and owner in place otherwise.
    The file is created with its final mode before any content arrives, then renamed."""
    try:
        data = local_path(src).read_bytes()
    except OSError as exc:  # the message names the path, never content
        raise OperationError(f"secret source {src}: {exc.strerror}") from None
    current = host.get_fact(SecretFile, path=dest)
    q = shlex.quote(dest)
    if current is None or current["sha256"] != hashlib.sha256(data).hexdigest():
        tmp = f"{dest}.gpurig-tmp"
        parent = shlex.quote(str(PurePosixPath(dest).parent))
        yield f"mkdir -p {parent} && install -m {mode} /dev/null {shlex.quote(tmp)}"
        yield FileUploadCommand(BytesIO(data), tmp)
        if owner:
            yield f"chown {shlex.quote(owner)} {shlex.quote(tmp)}"
        yield f"mv -f {shlex.quote(tmp)} {q}"
        return
    changed = False
    if int(current["mode"], 8) != int(mode, 8):
        changed = True
        yield f"chmod {mode} {q}"
    if owner and current["owner"] != owner.split(":")[0]:
        changed = True
        yield f"chown {shlex.quote(owner)} {q}"
    if not changed:
        host.noop(f"{dest} has the declared content, mode {mode} and owner")


def missing_sources(declared: list[dict[str, Any]]) -> list[str]:
    """Secret sources that are not files on this machine."""
    return [item["src"] for item in declared if not local_path(item["src"]).is_file()]


@deploy("Secrets")
def secrets(spec: dict[str, Any]) -> None:
    declared = spec.get("secrets") or []
    # Every source is checked before anything is queued: a typo changes nothing on the host.
    missing = missing_sources(declared)
    if missing:
        raise DeployError(f"secret source files not found on this machine: {', '.join(missing)}")
    for item in declared:
        secret(
            name=f"Secret {item['dest']}",
            src=item["src"],
            dest=item["dest"],
            mode=item.get("mode", "0600"),
            owner=item.get("owner"),
        )
