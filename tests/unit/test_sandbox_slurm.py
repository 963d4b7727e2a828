"""The sandbox's SLURM records and slurm.conf (the cluster itself runs in test_slurm.py)."""

from __future__ import annotations

from pathlib import Path

from gpurig.sandbox import slurm, users
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
    script = users.setup_script(slurm.ACCOUNT, "ssh-ed25519 AAAA test")
    assert "useradd --uid 2000 --user-group --shell /bin/bash --home-dir /shared/home/alice" in (
        script
    )
    assert "sudo" not in script
    assert "id -u alice" in script  # an existing user is left alone (runs on every node)
    assert "[ ! -d /shared/home/alice ]" in script  # a shared home is made once


def test_the_cluster_user_is_made_as_sandbox_up_user_makes_one() -> None:
    """One mechanism: the SLURM user gets what `--user` gives (rootless Podman's helpers and
    subordinate ids, the client key), only with its fixed uid and shared home."""
    key = "ssh-ed25519 AAAA test"
    plain, cluster = (
        users.setup_script(users.Account("alice"), key),
        users.setup_script(slurm.ACCOUNT, key),
    )
    assert cluster.replace("--uid 2000 ", "").replace("/shared/home/", "/home/") == plain
    assert "usermod --add-subuids" in plain and "chmod 666 /dev/net/tun" in plain
    assert set(users.PACKAGES) <= set(slurm.PACKAGES["slurmd"])


def test_status_rows_name_the_controller_and_each_node_s_sinfo_state(monkeypatch) -> None:
    state = State(name="ci-7")
    for rec in cluster():
        state.hosts[rec.name] = rec
    monkeypatch.setattr(
        slurm, "node_states", lambda ctl, env: {"slurm-1": "idle", "slurm-2": "drained"}
    )
    rows = slurm.status(state, {})
    assert [(r["name"], r["kind"], r["address"], r["up"], r["state"]) for r in rows] == [
        ("slurmctld", "slurm", "10.107.128.2:6817", True, "sinfo answers"),
        ("slurm-1", "slurmd", "10.107.128.3:6818", True, "idle"),
        ("slurm-2", "slurmd", "10.107.128.4:6818", False, "drained"),
    ]
    monkeypatch.setattr(slurm, "node_states", lambda ctl, env: {})
    assert [(r["up"], r["state"]) for r in slurm.status(state, {})] == [
        (False, "sinfo does not answer"),
        (False, "not in sinfo"),
        (False, "not in sinfo"),
    ]
    assert slurm.status(State(name="ci-7"), {}) == []


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
