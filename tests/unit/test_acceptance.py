"""Acceptance judging on the results recorded on an H100 80GB VM (driver 580.159.04), and the
script's no-GPU path."""

from __future__ import annotations

import subprocess
import sys

import pytest
from gpu_fixtures import read_fixture

from gpurig.read import acceptance

RECORDED = [
    acceptance.parse_result(line)
    for line in read_fixture("acceptance_h100_580.159.04_vm.jsonl").splitlines()
]


def test_recorded_h100_runs_pass_with_the_default_margin() -> None:
    assert len(RECORDED) == 3
    for result in RECORDED:
        verdict = acceptance.judge(result)
        assert verdict.status == "pass", verdict.reasons
        assert verdict.figures["baseline"]["model"] == "H100 SXM5 80GB"
        assert verdict.figures["bf16_tflops"] == result["bf16_tflops"]


def test_a_tighter_margin_fails_with_the_numbers() -> None:
    verdict = acceptance.judge(RECORDED[0], margin=0.15)
    assert verdict.status == "fail"
    (reason,) = verdict.reasons  # 793.3 < 841.1; the 3001 GB/s copy still clears 2847.5
    assert reason.startswith("bf16_tflops 793.3 TFLOPS is below 841.1 TFLOPS")


def test_a_wrong_matmul_answer_fails_whatever_the_speed() -> None:
    verdict = acceptance.judge({**RECORDED[0], "matmul_max_rel_error": 0.25})
    assert verdict.status == "fail"
    assert verdict.reasons == ["matmul gives a wrong answer: max relative error 0.25"]


def test_margin_must_be_a_fraction() -> None:
    with pytest.raises(ValueError, match="margin"):
        acceptance.judge(RECORDED[0], margin=35)


@pytest.mark.parametrize(
    ("name", "row"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM5 80GB"),
        ("NVIDIA H100 PCIe", "H100 PCIe 80GB"),
        ("NVIDIA H200", "H200 SXM 141GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB"),
        ("NVIDIA L40S", "L40S"),
    ],
)
def test_baseline_rows_match_names_nvidia_smi_prints(name: str, row: str) -> None:
    match = acceptance.baseline_for(name)
    assert match is not None and match["model"] == row and match["source"]


def test_unknown_model_is_not_judged_on_speed() -> None:
    verdict = acceptance.judge({**RECORDED[0], "model": "NVIDIA H100 NVL"})
    assert verdict.status == "no-baseline"


def test_script_reports_no_gpu_cleanly_on_a_machine_without_torch_or_gpu() -> None:
    run = subprocess.run(
        [sys.executable, "-c", acceptance.ACCEPTANCE_SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result = acceptance.parse_result(run.stdout)
    assert result["gpu"] is False and result["reason"]
    assert acceptance.judge(result).status == "no-gpu"


def test_parse_result_refuses_output_without_json() -> None:
    with pytest.raises(ValueError, match="no JSON"):
        acceptance.parse_result("Traceback (most recent call last):\n")
