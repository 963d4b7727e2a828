"""Helpers for the integration tests: a real sandbox (root, namespaces, Podman)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gpurig.sandbox import manager
from gpurig.sandbox.state import State, load

REPO_ROOT = Path(__file__).resolve().parents[2]
FLEET, FULL = 3, 1


def gpurig(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed `gpurig` CLI as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "gpurig.cli", *args],
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
    )


class Sandbox:
    """A running sandbox: its directory, records and access files."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self.paths = manager.Paths(top)

    def up(self, fleet: int = FLEET, full: int = FULL) -> subprocess.CompletedProcess[str]:
        return gpurig(
            "sandbox", "up", "--fleet", str(fleet), "--full", str(full), "--dir", str(self.top)
        )

    @property
    def state(self) -> State:
        return load(self.paths.state)
