"""`gpurig accept --group` over real SSH on two sandbox fleet hosts, which have no GPU: the
second host's GPU query is read, the group is refused before the first host is touched (where
mpirun would run), and nothing is recorded. (Where the hosts have GPUs the all-reduce runs:
no GPU here, and no run is faked; tests/unit/test_nccl_group.py holds the run on recorded
outputs.)"""

from __future__ import annotations

from pathlib import Path

import yaml
from support import Sandbox, gpurig

IMAGE = "registry.example/nccl-tests@sha256:" + "0" * 64


def test_a_group_of_hosts_without_gpus_is_refused_after_reading_them(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    inventory = yaml.safe_load(sandbox.paths.inventory.read_text())
    hosts = ["fleet-001", "fleet-002"]
    inventory.setdefault("groups", {})["pair"] = {}
    for name in hosts:
        inventory["hosts"][name]["groups"] = [*inventory["hosts"][name].get("groups", []), "pair"]
        # gpu: auto over the sandbox's own `absent`: what a rental whose GPU is unknown says
        accept = {"nccl_image": IMAGE}
        inventory["hosts"][name]["spec"] = {"engine": "docker", "gpu": "auto", "acceptance": accept}
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(inventory))
    state = tmp_path / "state"
    done = gpurig(
        "accept", "--group", "pair", "--inventory", str(path), env={"XDG_STATE_HOME": str(state)}
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr.strip().endswith(
        "accept --group refused: group pair: fleet-002 lists no GPU; the all-reduce across "
        "hosts runs only where every host of the group has GPUs"
    )
    assert not state.exists()  # nothing recorded
