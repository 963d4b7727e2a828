"""The CI example runs the drift command, publishes the summary even on drift, keeps the key
secret."""

from __future__ import annotations

from pathlib import Path

import yaml

WORKFLOW = Path(__file__).resolve().parents[2] / "examples" / "github-actions-drift.yml"


def test_workflow_runs_drift_and_always_publishes_the_summary() -> None:
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["drift"]["steps"]
    runs = {step.get("name"): step for step in steps}
    assert (
        "gpurig drift inventories/fleet.yaml --format markdown --output drift.md"
        in (runs["Check the fleet"]["run"])
    )
    assert "if" not in runs["Check the fleet"]  # its exit code fails the job on drift
    summary = runs["Job summary"]
    assert summary["if"] == "always()" and '>> "$GITHUB_STEP_SUMMARY"' in summary["run"]


def test_workflow_key_is_written_0600_and_never_echoed() -> None:
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["drift"]["steps"]
    [key_step] = [s for s in steps if "SSH_KEY" in s.get("env", {})]
    assert key_step["env"]["SSH_KEY"] == "${{ secrets.GPURIG_SSH_KEY }}"
    assert "chmod 0600" in key_step["run"] and "umask 077" in key_step["run"]
    assert "echo" not in key_step["run"] and "set -x" not in key_step["run"]
