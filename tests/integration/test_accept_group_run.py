"""`gpurig accept --group`'s orchestration over real SSH on sandbox fleet hosts with stand-in
tools that replay recorded outputs and log how they were run: `nvidia-smi` (the H100 VM's
recordings, served only for the arguments they were recorded with), the engine (`docker`, which
starts what follows the image) and `mpirun` (nccl-tests' output of a 2-host run, NVIDIA/nccl-tests
issue #369: wrong values). What is held: mpirun runs on the group's first host, in the pinned
image, naming every host by its address with its GPUs as slots, first host first; the verdict
and the record; a group refused for a member that lists no GPU opens no SSH session on the first
host; the first host's own refusal; an unreachable member's reason."""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support import Sandbox, gpurig

from tests.unit.gpu_fixtures import read_fixture, recorded_command

IMAGE = "registry.example/nccl-tests@sha256:" + "0" * 64
FIRST, SECOND = "fleet-002", "fleet-003"
LOG = "/tmp/gpurig-accept-log"
REPLAY = (
    "nvidia-smi_query-gpu_csv-noheader_h100_580.159.04_health-fields.txt",
    "nvidia-smi--version_h100_580.159.04_vm.txt",
    "nvidia-smi-L_h100_580.159.04_vm.txt",
)
RUN = "nccl-tests_all_reduce_perf_gh200x2_2-node_wrong-out-of-bounds.txt"
TOOLS = ("/usr/local/bin/nvidia-smi", "/usr/local/bin/docker", "/usr/local/bin/mpirun")


def ssh(box: Sandbox, host: str, script: str, stdin: str | None = None) -> str:
    done = subprocess.run(["ssh", "-F", str(box.paths.ssh_config), host, script], input=stdin,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, (script, done.stderr[-2000:])
    return done.stdout


def put(box: Sandbox, host: str, path: str, text: str, mode: str = "755") -> None:
    q = shlex.quote(path)
    ssh(box, host, f"mkdir -p $(dirname {q}) && cat > {q} && chmod {mode} {q}", text)


def nvidia_smi() -> str:
    """A stand-in that prints each recording only for the arguments it was recorded with."""
    cases = "".join(
        f"  {shlex.quote(recorded_command(name).removeprefix('nvidia-smi '))}) cat <<'EOF'\n"
        f"{read_fixture(name).rstrip()}\nEOF\n  ;;\n"
        for name in REPLAY
    )
    return f'#!/bin/sh\ncase "$*" in\n{cases}  *) echo "not recorded: $*" >&2; exit 9 ;;\nesac\n'


DOCKER = f"""#!/bin/sh
printf '%s\\n' "$*" >> {LOG}/docker.argv
while [ "$#" -gt 0 ] && [ "$1" != mpirun ]; do shift; done
exec "$@"
"""
MPIRUN = f"""#!/bin/sh
printf '%s\\n' "$*" >> {LOG}/mpirun.argv
cat {LOG}/run.txt
"""
# sshd runs ~/.ssh/rc at the start of every session: the first host counts them.
SESSIONS = f"echo session >> {LOG}/sessions\n"


@pytest.fixture
def hosts(sandbox: Sandbox) -> Iterator[Sandbox]:
    """Both hosts with the stand-ins and the log; the first counting its SSH sessions. Taken
    away after the test."""
    for host in (FIRST, SECOND):
        ssh(sandbox, host, f"rm -rf {LOG} && mkdir -p {LOG}")
        put(sandbox, host, TOOLS[0], nvidia_smi())
    put(sandbox, FIRST, TOOLS[1], DOCKER)
    put(sandbox, FIRST, TOOLS[2], MPIRUN)
    put(sandbox, FIRST, f"{LOG}/run.txt", read_fixture(RUN), "644")
    put(sandbox, FIRST, "/root/.ssh/rc", SESSIONS, "644")
    yield sandbox
    for host in (FIRST, SECOND):
        ssh(sandbox, host, f"rm -rf {LOG} /root/.ssh/rc {' '.join(TOOLS)}")


def inventory(box: Sandbox, path: Path, **second: object) -> Path:
    """The sandbox inventory with FIRST and SECOND in group `pair`, in that order, running
    mpirun in the pinned image; `second` overrides SECOND's entry (its ssh port, say)."""
    document = yaml.safe_load(box.paths.inventory.read_text())
    document.setdefault("groups", {})["pair"] = {}
    for name in (FIRST, SECOND):
        entry = document["hosts"][name]
        entry["groups"] = [*entry.get("groups", []), "pair"]
        entry["spec"] = {"engine": "docker", "gpu": "auto", "acceptance": {"nccl_image": IMAGE}}
    document["hosts"][SECOND].update(second)
    path.write_text(yaml.safe_dump(document))
    return path


def accept(path: Path, state: Path) -> subprocess.CompletedProcess[str]:
    return gpurig("accept", "--group", "pair", "--inventory", str(path), "--format", "json",
                  env={"XDG_STATE_HOME": str(state)})  # fmt: skip


def address(box: Sandbox, name: str) -> str:
    return yaml.safe_load(box.paths.inventory.read_text())["hosts"][name]["address"]


def logged(box: Sandbox, name: str) -> list[str]:
    return ssh(box, FIRST, f"cat {LOG}/{name} 2>/dev/null || true").splitlines()


def sessions(box: Sandbox) -> int:
    """SSH sessions the first host had since its rc file was put there, this reading's own
    left out."""
    return len(logged(box, "sessions")) - 1


def test_mpirun_runs_from_the_first_host_over_every_host_and_the_verdict_is_recorded(
    hosts: Sandbox, tmp_path: Path
) -> None:
    path, state = inventory(hosts, tmp_path / "fleet.yaml"), tmp_path / "state"
    done = accept(path, state)
    assert done.returncode == 1, done.stderr  # the recorded run had wrong values
    [docker] = logged(hosts, "docker.argv")
    assert docker.startswith("run --rm --network host --ipc host --gpus all ")
    assert docker.split()[docker.split().index(IMAGE) + 1] == "mpirun"
    [mpirun] = logged(hosts, "mpirun.argv")
    assert sessions(hosts) >= 1  # the run's own (the count is seen to move)
    words = mpirun.split()
    slots = f"{address(hosts, FIRST)}:1,{address(hosts, SECOND)}:1"  # first host first
    assert words[words.index("-H") + 1] == slots and words[words.index("-np") + 1] == "2"
    assert ssh(hosts, SECOND, f"ls {LOG}") == ""  # mpirun ran on the first host alone
    [record_file] = list(state.rglob("groups/pair.json"))
    record = json.loads(record_file.read_text())
    assert [(h["name"], h["address"], h["gpus"], h["models"]) for h in record["hosts"]] == [
        (FIRST, address(hosts, FIRST), 1, ["NVIDIA H100 80GB HBM3"]),
        (SECOND, address(hosts, SECOND), 1, ["NVIDIA H100 80GB HBM3"]),
    ]
    assert record["status"] == "fail" and record["ran_in"] == f"image {IMAGE} on {FIRST}"
    assert record["reasons"][:2] == [
        "all_reduce_perf found 128 wrong values (#wrong)",
        "all_reduce_perf found 4 out-of-bounds values",
    ]
    assert record["figures"]["nccl"]["ranks"] == 2


def test_a_member_without_gpus_refuses_the_group_before_the_first_host_is_touched(
    hosts: Sandbox, tmp_path: Path
) -> None:
    ssh(hosts, SECOND, f"rm {TOOLS[0]}")
    state = tmp_path / "state"
    done = accept(inventory(hosts, tmp_path / "fleet.yaml"), state)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip().endswith(f"accept --group refused: group pair: {SECOND} lists "
                                        "no GPU; the all-reduce across hosts runs only where "
                                        "every host of the group has GPUs")  # fmt: skip
    assert sessions(hosts) == 0  # no SSH session on the first host
    assert not state.exists()


def test_the_first_hosts_own_refusal_runs_nothing(hosts: Sandbox, tmp_path: Path) -> None:
    ssh(hosts, FIRST, f"rm {TOOLS[0]}")
    state = tmp_path / "state"
    done = accept(inventory(hosts, tmp_path / "fleet.yaml"), state)
    assert done.returncode == 1 and done.stdout == ""
    assert f"accept --group refused: group pair: {FIRST} lists no GPU" in done.stderr
    assert logged(hosts, "docker.argv") == [] and logged(hosts, "mpirun.argv") == []
    assert not state.exists()


def test_an_unreachable_member_fails_the_group_naming_it(hosts: Sandbox, tmp_path: Path) -> None:
    entry = yaml.safe_load(hosts.paths.inventory.read_text())["hosts"][SECOND]
    closed = {**entry["ssh"], "port": 1, "connect_timeout": 5}  # nothing listens there
    state = tmp_path / "state"
    done = accept(inventory(hosts, tmp_path / "fleet.yaml", ssh=closed), state)
    assert done.returncode == 1, done.stderr
    [record_file] = list(state.rglob("groups/pair.json"))
    record = json.loads(record_file.read_text())
    assert record["status"] == "fail"
    [reason] = record["reasons"]
    assert reason.startswith(f"cannot read {SECOND}: ")
    assert sessions(hosts) == 0 and logged(hosts, "mpirun.argv") == []


def test_the_stand_in_replays_only_what_was_recorded(tmp_path: Path) -> None:
    """The stand-in nvidia-smi answers the recorded arguments alone (run here, by sh)."""
    script = tmp_path / "nvidia-smi"
    script.write_text(nvidia_smi())
    listed = subprocess.run(["sh", str(script), "-L"], capture_output=True, text=True)
    assert listed.stdout == read_fixture(REPLAY[2])
    odd = subprocess.run(["sh", str(script), "-q"], capture_output=True, text=True)
    assert odd.returncode == 9
