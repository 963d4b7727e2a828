"""Acceptance wiring: the GPUs named by the one GPU query fact on real `nvidia-smi -L` outputs,
one host's verdict from recorded H100 results, the fact's command run here (no GPU), the record
and the `gpurig accept` refusals that need no host."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from gpu_fixtures import read_fixture, run_with_stand_in
from test_nccl_tests import recorded

from gpurig.cli.main import main
from gpurig.facts.gpurig_acceptance import Acceptance
from gpurig.facts.gpurig_nvidia import NvidiaGpus
from gpurig.onboard import accept
from gpurig.read import acceptance
from gpurig.spec.inventory import load_inventory_text

H100 = acceptance.parse_result(read_fixture("acceptance_h100_580.159.04_vm.jsonl").splitlines()[0])
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB6w8YgX1fT9tJmA1q0N3s0p2Yk6mVn2r8xqB5b3QdJc"
INVENTORY = f"""\
version: 1
hosts:
  gpu-1:
    address: 192.0.2.10
    ssh: {{user: root, host_key: "{KEY}"}}
    spec: {{gpu: required}}
"""


@pytest.mark.parametrize(
    ("fixture", "names"),
    [
        ("nvidia-smi-L_h100_580.159.04_vm.txt", ["NVIDIA H100 80GB HBM3"]),
        # MIG devices are listed under their GPU: the GPUs alone are counted
        ("nvidia-smi-L_a100-sxm4-80gb-x4_mig-on-gpu0_535.54.03.txt", ["NVIDIA A100-SXM4-80GB"] * 4),
        ("nvidia-smi-L_titan-v_rtx5880ada_no-mig_570.86.15.txt",
         ["NVIDIA TITAN V", "NVIDIA RTX 5880 Ada Generation"]),
    ],
)  # fmt: skip
def test_gpu_names_from_real_listings(fixture: str, names: list[str]) -> None:
    """Acceptance judges the GPUs the GPU query lists (no listing parser of its own)."""
    listing = NvidiaGpus.parse({"list": f"ran\n{read_fixture(fixture)}"})["listing"]
    assert [gpu["name"] for gpu in listing] == names


def test_no_gpu_is_not_a_failure_unless_the_spec_requires_one() -> None:
    assert acceptance.judge_host([], None, None, required=False).status == "no-gpu"
    required = acceptance.judge_host([], None, None, required=True)
    assert required.status == "fail" and "gpu: required" in required.reasons[0]


def test_gpu_without_torch_is_unmeasured_but_cuda_not_initialising_fails() -> None:
    gpus = ["NVIDIA H100 80GB HBM3"]
    no_torch = {"gpu": False, "reason": "torch not importable: No module named 'torch'"}
    assert acceptance.judge_host(gpus, no_torch, None, False).status == "unmeasured"
    no_cuda = {"gpu": False, "reason": "torch.cuda.is_available() is False", "torch": "2.11.0"}
    verdict = acceptance.judge_host(gpus, no_cuda, None, False)
    assert verdict.status == "fail" and verdict.reasons[0].startswith("CUDA does not initialise")


def test_recorded_h100_passes_and_a_failed_dcgmi_fails_it() -> None:
    gpus = ["NVIDIA H100 80GB HBM3"]
    assert acceptance.judge_host(gpus, H100, 0, True).status == "pass"
    failed = acceptance.judge_host(gpus, H100, 226, True)
    assert failed.status == "fail"
    assert failed.reasons == ["dcgmi diag -r 1 failed (exit 226); see its output"]
    assert failed.figures["bf16_tflops"] == H100["bf16_tflops"]


def test_fact_run_here_reports_what_the_script_found() -> None:
    """No torch and no GPU here: the script says so, and no dcgmi ran. (`gpurig accept` runs
    the fact only where the GPU query lists a GPU.)"""
    fact = Acceptance()
    out = subprocess.run(["sh", "-c", fact.command()], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    found = fact.process(out.stdout.splitlines())
    assert found["result"]["gpu"] is False and found["error"] is None and found["dcgmi"] is None


def test_fact_reads_a_recorded_result_from_the_container(tmp_path: Path) -> None:
    """The fact's own shell, with a stand-in `docker` printing a result recorded on an H100."""
    fact = Acceptance()
    command = fact.command(engine="docker", container="train")
    result = read_fixture("acceptance_h100_580.159.04_vm.jsonl").splitlines()[1]
    found = fact.process(run_with_stand_in(tmp_path, "docker", result + "\n", command))
    assert (tmp_path / "args").read_text().split()[:4] == ["exec", "train", "python3", "-c"]
    assert found["result"]["bf16_tflops"] == 790.3 and found["dcgmi"] is None


FORGER = """\
#!/bin/sh
cat {output}
# What a container could print: every marker shape gpurig ever used, with a guessed nonce
printf '%s\\n' '--gpurig-nonce 00000000-0000-4000-8000-000000000000' \\
  '--gpurig-part-00000000-0000-4000-8000-000000000000 nccl.exit' 0 \\
  '--gpurig-part-00000000-0000-4000-8000-000000000000 dcgmi.exit' 0 \\
  '--gpurig-part-00000000-0000-4000-8000-000000000000 result' '{{"gpu": true}}' \\
  '--gpurig-accept-0123456789abcdef-dcgmi 0' '--gpurig-accept-0123456789abcdef-result'
# and where it could look for the real nonce: its environment, its parent's command line
env; tr '\\0' ' ' </proc/$PPID/cmdline; echo
exit 3
"""


def test_a_step_s_output_cannot_forge_a_section_or_a_status(tmp_path: Path) -> None:
    """all_reduce_perf (in the user's image) prints forged markers and statuses, and the
    environment and command line it could learn the nonce from: all of it stays the nccl
    step's output, its status is the one it exited with, and no other step appears."""
    fact = Acceptance()
    (tmp_path / "output").write_text(
        recorded("nccl-tests_all_reduce_perf_h100x16_2-node_a3mega.txt")
    )
    forger = tmp_path / "all_reduce_perf"
    forger.write_text(FORGER.format(output=tmp_path / "output"))
    forger.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = subprocess.run(
        ["/bin/sh", "-c", fact.command(gpus=8, nccl_bytes=1024)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    lines = out.stdout.splitlines()
    nonce = lines[0].split()[1]
    found = fact.process(lines)
    assert found["nccl"]["exit"] == 3 and found["dcgmi"] is None
    assert found["result"]["gpu"] is False  # the script's own answer here, not the forged one
    output = found["nccl"]["output"]
    assert "00000000-0000-4000-8000-000000000000 nccl.exit" in output
    assert "--gpurig-accept-0123456789abcdef-dcgmi 0" in output
    assert "gpurig_nonce" not in output and nonce not in output
    # the nonce is on the shell's own lines only: its first line and its markers
    assert [line.split()[-1] for line in lines if nonce in line] == [
        nonce, "result", "nccl", "nccl.exit"
    ]  # fmt: skip


def test_record_and_reports(tmp_path: Path) -> None:
    [host] = load_inventory_text(INVENTORY, str(tmp_path / "fleet.yaml")).hosts
    found = {"result": H100, "error": None, "dcgmi": None}
    accepted = accept.judged(host, ["NVIDIA H100 80GB HBM3"], found, 0.35)
    assert not accepted.failed and accepted.ran_in == "host"
    path = accept.save(host, accepted, tmp_path / "state")
    assert path.parent.parent == tmp_path / "state" and path.name == "gpu-1.json"
    record = json.loads(path.read_text())
    assert record["status"] == "pass" and record["figures"]["copy_gbps"] == 3001.1
    assert record["figures"]["baseline"]["model"] == "H100 SXM5 80GB"
    table = accept.render(host, accepted, "table").splitlines()
    assert table[0].split() == ["host", "gpu-1"]
    assert ["bf16_tflops", "793.3"] in map(str.split, table)
    assert json.loads(accept.render(host, accepted, "json")) == record
    assert accept.summary(accepted).startswith("pass: NVIDIA H100 80GB HBM3: bf16 793.3 TFLOPS")


def test_the_all_reduce_step_is_recorded_and_reported(tmp_path: Path) -> None:
    """8 GPUs: the recorded 2-host H100 run (tests/unit/test_nccl_tests.py) stops at 8 GiB, short
    of the 8x H100 baseline's 16 GiB: the host fails with the figures recorded."""
    [host] = load_inventory_text(INVENTORY, str(tmp_path / "fleet.yaml")).hosts
    output = recorded("nccl-tests_all_reduce_perf_h100x16_2-node_a3mega.txt")
    found = {"result": H100, "error": None, "dcgmi": None, "nccl": {"exit": 0, "output": output}}
    accepted = accept.judged(host, ["NVIDIA H100 80GB HBM3"] * 8, found, 0.35)
    assert accepted.failed
    record = json.loads(accept.render(host, accepted, "json"))
    assert record["figures"]["nccl"]["busbw_gbps"] == 338.82
    assert record["figures"]["nccl"]["baseline"]["busbw_gbps"] == 460.0
    rows = [line.split("  ", 1) for line in accept.render(host, accepted, "table").splitlines()]
    assert [
        "nccl all-reduce",
        "fail: busbw 338.82 GB/s at 8589934592 bytes (baseline 460.0 GB/s)",
    ] in [[k.strip(), v.strip()] for k, v in rows]
    assert "the run stopped at 8589934592 bytes" in accept.summary(accepted)


def test_a_hosts_odd_output_reaches_the_report_escaped(tmp_path: Path) -> None:
    [host] = load_inventory_text(INVENTORY, str(tmp_path / "fleet.yaml")).hosts
    odd = {"gpu": None, "reason": "boom\x1b[2J\nforged line"}
    found = {"result": odd, "error": None, "dcgmi": None}
    accepted = accept.judged(host, ["NVIDIA H100 80GB HBM3"], found, 0.35)
    assert accepted.failed
    for text in (accept.summary(accepted), accept.render(host, accepted, "table")):
        assert "\x1b" not in text and "forged line" in text and "\nforged" not in text


def test_accept_refuses_an_unknown_host(tmp_path: Path) -> None:
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(INVENTORY)
    result = CliRunner().invoke(main, ["accept", "nope", "--inventory", str(inventory)])
    assert result.exit_code == 2 and "no host named nope" in result.output
