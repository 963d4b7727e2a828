"""One host's refusal fails that host's run alone, in gpurig's words and without a traceback:
the refusal (an OperationError, raised while pyinfra prepares the operations when it shows
what it will change and asks first, or while it runs them with -y) is recorded for it, and
the other hosts are converged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import Sandbox, remote, write_inventory

from gpurig.remote.converge import DEPLOY_ROOT

REFUSED, CONVERGED = "fleet-001", "fleet-003"
DEST = "/root/gpurig-refusal-test"


def pyinfra(inventory: Path, asked: bool) -> str:
    """The converge of REFUSED and CONVERGED as the guides run it: asked first (the operations
    prepared, what changes shown, enter pressed), or with -y; it fails (REFUSED's run)."""
    argv = [sys.executable, "-m", "pyinfra", *([] if asked else ["-y"])]
    argv += ["--limit", REFUSED, "--limit", CONVERGED, "inventory.py", "deploys/gpu_host.py"]
    done = subprocess.run(
        argv, cwd=DEPLOY_ROOT, input="\n", capture_output=True, text=True, timeout=600,
        env={**os.environ, "GPURIG_INVENTORY": str(inventory)},
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode != 0, said[-3000:]
    assert "Traceback" not in said, said[-3000:]
    return said


@pytest.mark.parametrize("asked", [True, False], ids=["asked-first", "with-y"])
def test_a_refused_host_fails_alone_and_the_others_converge(
    sandbox: Sandbox, tmp_path: Path, asked: bool
):
    src = tmp_path / "token"
    src.write_text("a token\n")
    missing = tmp_path / "no-such-token"

    def spec(source: Path) -> dict:
        return {"engine": "none", "secrets": [{"src": str(source), "dest": DEST}]}

    inventory = write_inventory(
        sandbox, tmp_path / "inv.yaml", {REFUSED: spec(missing), CONVERGED: spec(src)}
    )
    for name in (REFUSED, CONVERGED):
        remote(sandbox, name).check_output(f"rm -f {DEST}")
    said = pyinfra(inventory, asked)
    assert f"{missing}: expected a readable file on this machine" in said, said[-3000:]
    assert remote(sandbox, CONVERGED).file(DEST).content_string == "a token\n", said[-3000:]
    assert not remote(sandbox, REFUSED).file(DEST).exists


@pytest.mark.parametrize("asked", [True, False], ids=["asked-first", "with-y"])
def test_a_refusal_inside_an_operation_fails_that_host_alone(
    sandbox: Sandbox, tmp_path: Path, asked: bool
):
    """Refused inside an operation's body (an engine on a host without systemd; a running
    container with drift is refused there too), which -y runs only while executing: the other
    host's later operations still run (its cleanup, after the engine)."""
    stale = "/tmp/ray/session_a"
    inventory = write_inventory(sandbox, tmp_path / "inv.yaml", {
        REFUSED: {"engine": "docker"},
        CONVERGED: {"engine": "none", "cleanup": {"ray_sessions": True}},
    })  # fmt: skip
    remote(sandbox, CONVERGED).check_output(
        f"mkdir -p {stale} /tmp/ray/session_b && ln -sfn /tmp/ray/session_b /tmp/ray/session_latest"
    )
    said = pyinfra(inventory, asked)
    assert "gpurig: refused: engine docker: expected systemd on the host" in said, said[-3000:]
    assert not remote(sandbox, CONVERGED).file(stale).exists, said[-3000:]
