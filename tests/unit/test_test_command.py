"""The test command (`scripts/test.sh`: `pytest -q` with the project's configuration) shows why
each skipped test was skipped: a run that skipped the sandbox's tests must not look green."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIPS = """
import pytest

def test_needs_a_sandbox():
    pytest.skip("no sandbox on this machine")
"""


def test_a_skip_shows_its_reason(tmp_path: Path) -> None:
    (tmp_path / "test_skips.py").write_text(SKIPS)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-c", str(ROOT / "pyproject.toml"),
         "-p", "no:cacheprovider", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout
    assert "SKIPPED [1] " in done.stdout and ": no sandbox on this machine" in done.stdout, (
        done.stdout
    )
