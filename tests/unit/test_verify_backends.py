"""tests/verify refuses testinfra's paramiko backend, which accepts any unknown host key: run
as a user would run it, with each way of asking for that backend, and never connecting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _verify(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/verify", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [
        ["--hosts=paramiko://root@203.0.113.1"],
        ["--hosts=203.0.113.1"],  # no scheme: testinfra's default backend is paramiko
        ["--hosts=ssh://203.0.113.2,paramiko://203.0.113.1"],
        ["--hosts=203.0.113.1", "--connection=paramiko"],
    ],
    ids=["scheme", "default", "one-of-two", "connection-option"],
)
def test_paramiko_backend_is_refused_before_any_test(args: list[str]) -> None:
    result = _verify(*args)
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "paramiko backend, which accepts any unknown host key" in result.stderr
    assert "203.0.113.1" in result.stderr and "203.0.113.2" not in result.stderr


def test_ssh_backend_is_accepted() -> None:
    """Control: OpenSSH checks host keys as its config says; collecting needs no connection."""
    result = _verify("--hosts=ssh://203.0.113.1,203.0.113.2", "--connection=ssh", "--co")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tests collected" in result.stdout


def test_a_skip_for_want_of_an_inventory_says_so() -> None:
    """Without GPURIG_INVENTORY no spec is read: the engine checks skip naming the variable
    (testinfra's local backend: nothing connects, and no engine is declared)."""
    env = {k: v for k, v in os.environ.items() if k != "GPURIG_INVENTORY"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests/verify",
         "--hosts=local://", "-k", "engine_runs"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "this host declares no engine (GPURIG_INVENTORY is not set, so no inventory was " in (
        " ".join(result.stdout.split())
    )
