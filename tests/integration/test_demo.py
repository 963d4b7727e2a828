"""The README's first command, end to end, on a sandbox of its own name (the user's `demo`
sandbox, and the session's, keep running): it must pass its own checks, show the drift it
injects (in the Markdown a CI job would publish), and leave the fleet clean. Minutes: runs
after every other integration test."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from support import REPO_ROOT, gpurig

from gpurig.sandbox.state import locate

pytestmark = pytest.mark.last


def test_demo_runs_end_to_end_and_clears_the_drift_it_injects():
    if os.geteuid() != 0:
        pytest.fail("the demo needs root (the sandbox makes namespaces and containers)")
    name, top = locate(os.environ.get("GPURIG_TEST_DEMO_SANDBOX", "test-demo"), None)
    gpurig("sandbox", "down", "--name", name)
    # The venv's bin first, as scripts/test.sh has it: the demo's set-up finds uv there.
    path = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}"
    try:
        proc = subprocess.run(
            ["sh", "scripts/demo.sh", "--name", name],
            cwd=REPO_ROOT, env={**os.environ, "PATH": path},
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
        assert "--> Starting operation" not in proc.stdout  # pyinfra's output went to logs
        assert proc.stdout.rstrip().splitlines()[-1].startswith("== Done in ")
        report = (top / "demo" / "drift.md").read_text()
        for injected in ("full-1", "shm", "full-2", "socket"):
            assert injected in report, report
        inventory = top / "demo" / "inventory.yaml"
        after = gpurig("drift", str(inventory), "--format", "json")
        assert after.returncode == 0, after.stdout
        hosts = json.loads(after.stdout)["hosts"]
        assert [h["name"] for h in hosts] == ["full-1", "full-2"]
        assert not [f for h in hosts for f in h["findings"] if f["severity"] == "error"]
    finally:
        down = gpurig("sandbox", "down", "--name", name)
        assert down.returncode == 0, down.stderr
