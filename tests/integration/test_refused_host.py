"""One host's refusal fails that host's run alone: the refusal (an OperationError, raised while
pyinfra prepares the operations when it shows what it will change and asks first, or while it
runs them with -y) is recorded for it, and the other hosts are converged."""

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
    # As the guides run it: asked first (the operations prepared, what changes shown, enter
    # pressed), or with -y.
    argv = [sys.executable, "-m", "pyinfra", *([] if asked else ["-y"])]
    argv += ["--limit", REFUSED, "--limit", CONVERGED, "inventory.py", "deploys/gpu_host.py"]
    done = subprocess.run(
        argv, cwd=DEPLOY_ROOT, input="\n", capture_output=True, text=True, timeout=600,
        env={**os.environ, "GPURIG_INVENTORY": str(inventory)},
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode != 0, said[-3000:]
    assert f"{missing}: expected a readable file on this machine" in said, said[-3000:]
    assert remote(sandbox, CONVERGED).file(DEST).content_string == "a token\n", said[-3000:]
    assert not remote(sandbox, REFUSED).file(DEST).exists
