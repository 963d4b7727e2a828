"""benchmarks/node_contracts.py times only runs that answered as their contract does: a run's
exit status is kept, and one that is not its contract's answer (a crash at import) stops it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from benchmarks import node_contracts as bench


def test_a_run_keeps_its_exit_status() -> None:
    assert bench.measure([sys.executable, "-c", "raise SystemExit(3)"])[3] == 3
    assert bench.measure([sys.executable, "-c", "pass"])[3] == 0


def test_a_contract_that_crashed_at_import_is_no_answer() -> None:
    crashed = [sys.executable, "-c", "import gpurig_has_no_such_module"]
    with pytest.raises(bench.NotAnAnswer, match="gpurig npd: exit 1, not its contract's answer"):
        bench.answer("gpurig npd", crashed, dict(os.environ))
    with pytest.raises(bench.NotAnAnswer, match="exit 3"):
        bench.answer("NHC 1.4.3", [sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ))


def test_the_npd_contract_answers_here(tmp_path: Path) -> None:
    """The benchmark's own spec and command: an npd answer (0, 1 or 2, one short line)."""
    spec = tmp_path / "node.yaml"
    spec.write_text(bench.SPEC)
    env = {**os.environ, "HOME": str(tmp_path), "GPURIG_RUNTIME_DIR": str(tmp_path / "run")}
    argv = bench.gpurig("drift", "--local", "--spec", str(spec), "--mode", "npd")
    assert bench.answer("gpurig npd", argv, env) in (0, 1, 2)
