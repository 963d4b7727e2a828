"""A local image registry (Debian's docker-registry) on the sandbox bridge, so hosts pull
images by digest for real."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from gpurig.fsutil import atomic_write
from gpurig.sandbox.net import GATEWAY
from gpurig.sandbox.proc import SandboxError, start_time, wait_port

PORT = 5000
ADDRESS = f"{GATEWAY}:{PORT}"


def start(top: Path) -> tuple[int, int | None]:
    """Start the registry; returns its pid and start time for the records."""
    binary = shutil.which("docker-registry")
    if not binary:
        raise SandboxError("docker-registry is not installed (apt-get install docker-registry)")
    config = top / "config.yml"
    atomic_write(
        config,
        "version: 0.1\n"
        "log: {level: warn}\n"
        f"storage: {{filesystem: {{rootdirectory: {top / 'data'}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: '{ADDRESS}'}}\n",
    )
    with open(top / "registry.log", "ab") as log:
        proc = subprocess.Popen(
            [binary, "serve", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    if not wait_port(GATEWAY, PORT, timeout=15):
        proc.kill()
        raise SandboxError(f"registry did not answer at {ADDRESS}; see {top / 'registry.log'}")
    return proc.pid, start_time(proc.pid)
