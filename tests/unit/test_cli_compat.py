"""`gpurig compat`: the JSON contract from DESIGN; exit 0 ok/warn, 1 fail, 2 bad arguments."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpurig.cli.main import main


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["compat", *args])
    return result.exit_code, result.output


def test_ok_json_shape() -> None:
    code, out = _run("--driver", "580.65.06", "--cuda", "13.0", "--json")
    assert code == 0
    assert json.loads(out) == {"verdict": "ok", "findings": []}


def test_warn_exits_zero_with_findings() -> None:
    code, out = _run(
        "--driver", "580.65.06", "--arch-list", "sm_80,sm_90,compute_90", "--capability", "12.0",
        "--json",
    )  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    assert doc["verdict"] == "warn"
    assert [set(f) for f in doc["findings"]] == [{"id", "severity", "message"}]
    assert doc["findings"][0]["id"] == "compat.torch_arch"


def test_fail_exits_one() -> None:
    code, out = _run("--driver", "570.124.04", "--kernel-module", "570.124.06", "--json")
    assert code == 1
    assert json.loads(out) == {
        "verdict": "fail",
        "findings": [
            {
                "id": "compat.kernel_module",
                "severity": "error",
                # Each version named in its role: the loaded module, then the user-space driver.
                "message": "loaded kernel module 570.124.06 differs from user-space driver "
                "570.124.04: nvidia-smi and CUDA fail with 'Driver/library version mismatch'",
            }
        ],
    }


def test_text_output() -> None:
    code, out = _run("--driver", "575.57.08", "--cuda", "13.0")
    assert code == 1
    assert out.splitlines()[0] == "verdict: fail"
    assert "error: compat.driver_cuda:" in out
    assert "fix: install NVIDIA driver >= 580.65.06" in out


@pytest.mark.parametrize(
    "args",
    [
        [],  # --driver is required
        ["--driver", "57x"],
        ["--driver", "570.124.04", "--cuda", "twelve"],
        ["--driver", "570.124.04", "--cuda", "10.2"],
        ["--driver", "570.124.04", "--kernel-module", "abc"],
        ["--driver", "570.124.04", "--arch-list", "sm_90"],
        ["--driver", "570.124.04", "--arch-list", "gfx90a", "--capability", "9.0"],
        ["--driver", "570.124.04", "--arch-list", "sm_90", "--capability", "nine"],
        ["--driver", "570.124.04", "--no-such-flag"],
    ],
)
def test_bad_arguments_exit_two(args: list[str]) -> None:
    code, out = _run(*args)
    assert code == 2, out
    assert "Error:" in out
