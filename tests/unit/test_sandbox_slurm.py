"""The sandbox's SLURM records and slurm.conf (the cluster itself runs in test_slurm.py)."""

from __future__ import annotations

from pathlib import Path

from gpurig.sandbox import slurm
from gpurig.sandbox.state import HostRecord, State, load, save


def cluster() -> list[HostRecord]:
    records = slurm.records(State(name="ci-7"))
    for i, rec in enumerate(records):
        rec.address = f"10.107.128.{i + 2}"
    return records


def test_three_full_hosts_one_controller_two_nodes() -> None:
    records = cluster()
    assert [(r.name, r.kind, r.role) for r in records] == [
        ("slurm-ctl", "full", "slurmctld"),
        ("slurm-1", "full", "slurmd"),
        ("slurm-2", "full", "slurmd"),
    ]
    assert [r.container for r in records] == [f"gpurig.ci-7.{r.name}" for r in records]


def test_slurm_conf_names_each_node_by_address_and_the_plugins_a_full_host_allows() -> None:
    controller, *nodes = cluster()
    lines = slurm.slurm_conf(controller, nodes).splitlines()
    assert "SlurmctldHost=slurm-ctl(10.107.128.2)" in lines
    assert "NodeName=slurm-1 NodeAddr=10.107.128.3 CPUs=1 State=UNKNOWN" in lines
    assert "NodeName=slurm-2 NodeAddr=10.107.128.4 CPUs=1 State=UNKNOWN" in lines
    assert "PartitionName=debug Nodes=slurm-1,slurm-2 Default=YES MaxTime=INFINITE State=UP" in (
        lines
    )
    # The cgroup plugins need a cgroup tree of their own, which a full host does not have.
    assert {"ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none"} <= set(lines)
    assert "AuthType=auth/munge" in lines


def test_the_user_has_one_uid_everywhere_and_a_shared_home() -> None:
    script = slurm.add_user()
    assert "useradd --uid 2000 --user-group --shell /bin/bash --home-dir /shared/home/alice" in (
        script
    )
    assert "sudo" not in script
    assert "id -u alice" in script  # an existing user is left alone (runs on every node)


def test_state_keeps_roles_volumes_and_the_cluster(tmp_path: Path) -> None:
    state = State(name="ci-7")
    for rec in cluster():
        rec.volumes = [f"{tmp_path}/shared:/shared"]
        state.hosts[rec.name] = rec
    state.slurm = {"controller": "slurm-ctl", "nodes": ["slurm-1", "slurm-2"]}
    save(tmp_path / "state.json", state)
    again = load(tmp_path / "state.json")
    assert again.hosts["slurm-1"].role == "slurmd"
    assert again.hosts["slurm-1"].volumes == [f"{tmp_path}/shared:/shared"]
    assert again.slurm == state.slurm
    assert len(again.full()) == 3
