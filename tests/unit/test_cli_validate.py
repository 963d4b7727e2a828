"""`gpurig validate`: exit 0 with a count when valid, 2 with the messages on stderr when not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from gpurig.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories" / "examples" / "example.yaml"
BAD = Path(__file__).parent / "bad_inventories" / "size-without-unit.yaml"
# The console script installed next to the interpreter running the tests (.venv/bin).
GPURIG = Path(sys.executable).with_name("gpurig")


def test_validate_valid_inventory_exits_0() -> None:
    result = CliRunner().invoke(main, ["validate", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "OK: 3 hosts\n"
    assert result.stderr == ""


def test_validate_invalid_inventory_exits_2_with_messages_on_stderr() -> None:
    result = CliRunner().invoke(main, ["validate", str(EXAMPLE), str(BAD)])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"{BAD}:11: hosts.a100-1.spec.containers.train.shm_size:")


def test_validate_without_files_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["validate"])
    assert result.exit_code == 2
    assert "Missing argument" in result.stderr


def test_console_script_exit_codes() -> None:
    ok = subprocess.run([GPURIG, "validate", EXAMPLE], capture_output=True, text=True, check=False)
    assert (ok.returncode, ok.stdout) == (0, "OK: 3 hosts\n")
    bad = subprocess.run([GPURIG, "validate", BAD], capture_output=True, text=True, check=False)
    assert bad.returncode == 2
    assert "expected a size: a number and a unit" in bad.stderr
