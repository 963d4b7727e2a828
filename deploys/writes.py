"""Commands that write a file atomically: created with its final mode before any content
arrives, filled by an upload, then renamed over the old one, so an interrupted converge
leaves the old file or the new one, never half of either."""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Iterator
from io import BytesIO
from pathlib import PurePosixPath

from pyinfra.api import FileUploadCommand, StringCommand


def put(data: bytes, dest: str, mode: str, owner: str | None = None) -> Iterator[object]:
    """Upload `data` to `dest`. A login that uses sudo stages the upload in a fresh private
    directory (mode 0700, owned by the login), not at a predictable /tmp name."""
    q_dest = shlex.quote(dest)
    tmp = shlex.quote(f"{dest}.gpurig-tmp")
    stage = f"/tmp/gpurig-{secrets.token_hex(16)}"
    parent = shlex.quote(str(PurePosixPath(dest).parent))
    yield StringCommand(
        f"mkdir -p {parent} && rm -f {tmp} && install -m {mode} /dev/null {tmp} && "
        f'mkdir -m 700 {stage} && chown "${{SUDO_UID:-$(id -u)}}" {stage}'
    )
    yield FileUploadCommand(
        BytesIO(data), f"{dest}.gpurig-tmp", remote_temp_filename=f"{stage}/upload"
    )
    chown = f"chown {shlex.quote(owner)} {tmp} && " if owner else ""
    yield StringCommand(f"rm -rf {stage}; {chown}mv -f {tmp} {q_dest}")


def remove(path: str) -> str:
    return f"rm -f {shlex.quote(path)}"
