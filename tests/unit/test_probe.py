"""The probe script run for real on this machine (full PATH and a bare one), and `process()` on
recorded GPU outputs served by a stand-in nvidia-smi that only replays fixture files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from facts.probe import SCRIPT_PATH, Probe, parse_probe, script_arguments
from gpurig.gpu_parse import QUERY_GPU_COMMAND, QUERY_GPU_FIELDS
from tests.unit.gpu_fixtures import read_fixture

TOP_LEVEL = {
    "probe_version", "host", "cgroup", "disks", "core_dumps", "engine", "containers",
    "imports", "gpu",
}  # fmt: skip


def run_script(args: list[str], path: str | None = None) -> dict[str, Any]:
    """Run probe.sh by hand, as its header says; return the raw JSON document."""
    env = {"PATH": path} if path is not None else dict(os.environ)
    proc = subprocess.run(
        ["sh", str(SCRIPT_PATH), *args], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(proc.stdout)


def bare_path(tmp_path: Path, tools: tuple[str, ...] = ("sh", "cat", "sed")) -> str:
    """A PATH holding only the named tools, as on a host stripped to the bone."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
    return str(bin_dir)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_script_prints_every_section_on_this_machine() -> None:
    doc = run_script(script_arguments(paths=["/tmp"]))
    assert set(doc) == TOP_LEVEL
    assert [d["path"] for d in doc["disks"]] == ["/", "/tmp"]
    assert doc["disks"][0]["free_bytes"] > 0 and doc["disks"][0]["inodes_total"] > 0
    assert doc["host"]["kernel"] == os.uname().release
    assert doc["host"]["uid"] == os.getuid()
    assert doc["host"]["sudo"] is None or os.getuid() != 0  # root is never asked about sudo
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    total = next(int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:"))
    assert doc["host"]["memory_bytes"] == total * 1024  # what shm.size compares with


def test_script_reports_absence_with_only_sh_cat_and_sed(tmp_path: Path) -> None:
    args = script_arguments(
        engine="docker",
        paths=["/tmp"],
        containers=["train"],
    )
    doc = run_script(args, path=bare_path(tmp_path))
    assert set(doc) == TOP_LEVEL
    assert doc["disks"][1] == {
        "path": "/tmp", "exists": True, "mount": None, "total_bytes": None, "free_bytes": None,
        "inodes_total": None, "inodes_free": None,
    }  # fmt: skip
    assert doc["engine"]["installed"] == {"docker": None, "podman": None}
    assert doc["containers"] == [
        {"name": "train", "engine": "docker", "torch": None, "oom_kill": None}
    ]
    assert doc["gpu"]["nvidia_smi"] is False


def test_script_escapes_quotes_backslashes_and_control_characters() -> None:
    weird = '/no/such "dir"\\' + "".join(chr(c) for c in range(1, 32) if c != 10)
    doc = run_script(script_arguments(paths=[weird]))
    assert doc["disks"][1]["path"] == weird
    assert doc["disks"][1]["exists"] is False


def test_fact_command_is_the_script_with_its_arguments() -> None:
    command = Probe().command(paths=["/srv/a b"], containers=["c"])
    assert command.startswith("set -- --gpu-fields ")
    assert "--path '/srv/a b' --container c\n" in command
    proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    doc = Probe().process(proc.stdout.splitlines())
    assert doc["disks"][1]["path"] == "/srv/a b"
    assert doc["containers"][0]["name"] == "c"


def test_gpu_query_is_gpu_parse_command() -> None:
    """The script builds QUERY_GPU_COMMAND from the fields the fact passes it."""
    args = script_arguments()
    fields = args[args.index("--gpu-fields") + 1]
    assert fields == ",".join(QUERY_GPU_FIELDS)
    assert 'nvidia-smi --query-gpu="$GPU_FIELDS" --format=csv,noheader,nounits' in (
        SCRIPT_PATH.read_text()
    )
    assert f"nvidia-smi --query-gpu={fields} --format=csv,noheader,nounits" == QUERY_GPU_COMMAND


REPLAY = {
    "--query-gpu": "nvidia-smi_query-gpu_csv_h100-mig_590.48.01.txt",
    "-q": "nvidia-smi-q-x_tesla-t4_515.105.01_reindented.xml",
    "-L": "nvidia-smi-L_h100-80gb-mig_590.48.01.txt",
}


def test_process_parses_recorded_gpu_outputs_through_the_script(tmp_path: Path) -> None:
    """A stand-in nvidia-smi replays recorded files; the script embeds, process() parses."""
    bin_dir = Path(bare_path(tmp_path))
    replays = tmp_path / "replay"
    replays.mkdir()
    for flag, name in REPLAY.items():
        (replays / flag.strip("-")).write_text(read_fixture(name))
    (bin_dir / "nvidia-smi").write_text(
        "#!/bin/sh\n"
        f"case $1 in --query-gpu=*) cat {replays}/query-gpu ;; -q) cat {replays}/q ;;\n"
        f"  -L) cat {replays}/L ;; esac\n"
    )
    (bin_dir / "nvidia-smi").chmod(0o755)
    doc = parse_probe(run_script(script_arguments(), path=str(bin_dir)))
    gpu = doc["gpu"]
    assert gpu["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu["gpus"][0]["mig.mode.current"] == "Enabled"
    assert gpu["throttle"] == {"00000000:00:1E.0": []}
    assert gpu["ecc_uncorrectable"] == {"00000000:00:1E.0": 0}
    assert gpu["compute_apps"] == []
    (listed,) = gpu["listing"]
    assert (listed["name"], listed["uuid"]) == (gpu["gpus"][0]["name"], gpu["gpus"][0]["uuid"])
    assert [d["profile"] for d in listed["mig"]] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert listed["mig"][3] == {
        "index": 3, "profile": "1g.10gb", "uuid": "MIG-00000003-0000-0000-0000-000000000003"
    }  # fmt: skip


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("proc_driver_nvidia_version_384.98_proprietary.txt", {"version": "384.98", "open": False}),
        (
            "proc_driver_nvidia_version_525.60.11_open_archlinux-no-date.txt",
            {"version": "525.60.11", "open": True},
        ),
    ],
)
def test_process_parses_kernel_module(name: str, expected: dict[str, Any]) -> None:
    gpu = parse_probe({"gpu": {"proc_version": read_fixture(name)}})["gpu"]
    assert gpu["kernel_module"] == expected


def test_process_parses_xid_lines() -> None:
    text = read_fixture("kernel_xid_119_gsp_rpc_timeout.txt")
    gpu = parse_probe({"gpu": {"xid_lines": text}})["gpu"]
    assert len(gpu["xids"]) == text.count("NVRM: Xid") > 0
    assert {(x["xid"], x["pci"]) for x in gpu["xids"]} == {(119, "0000:9b:00")}


def test_process_keeps_a_refused_query_as_an_error() -> None:
    text = read_fixture("nvidia-smi_query-gpu_error_compute_cap-not-valid.txt")
    gpu = parse_probe({"gpu": {"nvidia_smi": True, "query": text, "compute_apps": ""}})["gpu"]
    assert gpu["gpus"] is None
    assert "not a valid field" in gpu["gpus_error"]


def test_process_parses_embedded_json() -> None:
    torch = json.dumps({"version": "2.7.0", "cuda": "12.8", "arch_list": ["sm_90"]})
    doc = parse_probe(
        {
            "containers": [{"name": "t", "engine": "docker", "torch": torch}],
            "cgroup": {"memory_limit": "max", "oom_kill": "3"},
        }
    )
    assert doc["containers"][0]["torch"]["cuda"] == "12.8"
    assert doc["cgroup"]["memory_limit"] is None and doc["cgroup"]["oom_kill"] == 3


def test_process_refuses_output_that_is_not_json() -> None:
    assert Probe().process(["sh: 1: syntax error"])["error"].startswith("probe printed no JSON")


def test_process_reads_nvml_mismatch() -> None:
    text = read_fixture("driver_mismatch_nvml-570.124.txt")
    gpu = parse_probe({"gpu": {"nvidia_smi": True, "query": text, "compute_apps": text}})["gpu"]
    assert gpu["nvml_mismatch"] == "570.124"


@pytest.mark.parametrize(
    "document",
    [{"host": []}, {"gpu": "x"}, {"containers": {"name": "train"}}, {"containers": ["train"]},
     {"imports": [1]}, {"disks": "none"}],
)  # fmt: skip
def test_a_document_of_another_shape_is_unreadable_host_output(document: dict) -> None:
    """Host output of another shape is the host's (state.unreadable), never a crash in the
    judges that gpurig would report as its own bug."""
    from facts.gpurig_host import HostState, Snapshot, Unreadable

    fact = HostState()
    fact.command(reads=[(Probe, {})])
    marker = fact._marker
    values = fact.process([f"{marker} 0", "|" + json.dumps(document)])
    with pytest.raises(Unreadable, match="probe member"):
        Snapshot(values)(Probe)


def test_process_keeps_an_unreadable_listing_as_an_error() -> None:
    """`nvidia-smi -L` fails like plain nvidia-smi when NVML cannot start: kept, not guessed."""
    text = read_fixture("driver_mismatch_nvml-570.124.txt")
    gpu = parse_probe({"gpu": {"nvidia_smi": True, "listing": text, "compute_apps": ""}})["gpu"]
    assert gpu["listing"] is None
    assert "Failed to initialize NVML" in gpu["listing_error"]
