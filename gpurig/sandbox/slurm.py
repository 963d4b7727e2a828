"""A real SLURM cluster in the sandbox (`gpurig sandbox up --slurm`): slurmctld on one full
host, slurmd on two others, Debian 12's packages (SLURM 22.05, MUNGE 0.5) installed by apt from
the Debian mirror as a site would, one MUNGE key, one slurm.conf naming the nodes, and a
non-root user with the same uid everywhere whose home is on a directory of this machine bound
into the three hosts (the shared storage a cluster's homes live on), made by the sandbox's one
cluster-user mechanism (gpurig.sandbox.users: subuid/subgid and Podman for rootless
containers, so a job can run the user-scope converge).

In a full host (a privileged container with the machine's cgroup tree) slurmd tracks jobs by
their process tree (`proctrack/linuxproc`) and binds no tasks (`task/none`): the cgroup
plugins need a cgroup tree of their own.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpurig.sandbox import users
from gpurig.sandbox.proc import SandboxError, run
from gpurig.sandbox.state import HostRecord, State

CONTROLLER = "slurm-ctl"
NODES = ("slurm-1", "slurm-2")
PACKAGES = {
    # python3-venv: gpurig goes into a root-owned venv on each node (README, Cluster operators).
    # The user's rootless Podman too, in the same apt run (users.ensure finds it installed).
    "slurmctld": ("munge", "slurmctld", "slurm-client", *users.PACKAGES),
    "slurmd": ("munge", "slurmd", "slurm-client", "python3-venv", *users.PACKAGES),
}
SHARED = "/shared"  # where the shared directory appears in each SLURM host
USER, UID = "alice", 2000  # the cluster's user: no sudo, same uid on every node
ACCOUNT = users.Account(USER, UID, f"{SHARED}/home/{USER}")
CONF = "/etc/slurm/slurm.conf"
READY_TIMEOUT = 90.0
CTLD_PORT, SLURMD_PORT = 6817, 6818  # SLURM's defaults: slurm.conf names no ports

Log = Callable[[str], None]


def records(state: State) -> list[HostRecord]:
    """The three SLURM hosts: full hosts with a role, the shared directory bound in."""
    names = [(CONTROLLER, "slurmctld"), *((node, "slurmd") for node in NODES)]
    return [
        HostRecord(name=name, kind="full", index=101 + i, role=role,
                   container=f"gpurig.{state.name}.{name}")
        for i, (name, role) in enumerate(names)
    ]  # fmt: skip


def shared_dir(top: Path) -> Path:
    """The directory of this machine that is the cluster's shared storage."""
    return top / "shared"


def volumes(top: Path) -> list[str]:
    shared = shared_dir(top)
    shared.mkdir(mode=0o755, exist_ok=True)
    return [f"{shared}:{SHARED}"]


def slurm_conf(controller: HostRecord, nodes: Sequence[HostRecord]) -> str:
    """slurm.conf for the sandbox's cluster: addresses, not names, so no DNS is needed."""
    lines = [
        "# Written by gpurig sandbox up --slurm.",
        "ClusterName=gpurig",
        f"SlurmctldHost={controller.name}({controller.address})",
        "SlurmUser=slurm",
        "AuthType=auth/munge",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SchedulerType=sched/backfill",
        "ReturnToService=2",
        "MpiDefault=none",
        "StateSaveLocation=/var/lib/slurm/slurmctld",
        "SlurmdSpoolDir=/var/lib/slurm/slurmd",
        "SlurmctldLogFile=/var/log/slurm/slurmctld.log",
        "SlurmdLogFile=/var/log/slurm/slurmd.log",
        "SlurmctldPidFile=/run/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd.pid",
        "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none",
        *(f"NodeName={n.name} NodeAddr={n.address} CPUs=1 State=UNKNOWN" for n in nodes),
        f"PartitionName=debug Nodes={','.join(n.name for n in nodes)} Default=YES "
        "MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


def _sh(rec: HostRecord, script: str, env: dict[str, str], data: str | None = None) -> str:
    argv = ["podman", "exec", *(["-i"] if data is not None else []), rec.container,
            "sh", "-euc", script]  # fmt: skip
    return run(argv, env=env, input=data).stdout


def _install(rec: HostRecord, env: dict[str, str]) -> None:
    """The role's packages from the Debian mirror; services start later, once configured
    (policy-rc.d keeps apt's postinst from starting them without a slurm.conf)."""
    packages = " ".join(PACKAGES[rec.role])
    _sh(rec, f"for p in {packages}; do\n"
        "  dpkg-query -W -f '${db:Status-Abbrev}' \"$p\" 2>/dev/null | grep -q '^ii' || missing=1\n"
        "done\n"
        "[ -n \"${missing-}\" ] || exit 0\n"
        "trap 'rm -f /usr/sbin/policy-rc.d' EXIT\n"
        "printf '#!/bin/sh\\nexit 101\\n' >/usr/sbin/policy-rc.d\n"
        "chmod 755 /usr/sbin/policy-rc.d\n"
        "export DEBIAN_FRONTEND=noninteractive\n"
        "apt-get update -qq\n"
        f"apt-get install -y -qq --no-install-recommends {packages} >/dev/null\n", env)  # fmt: skip


def _hosts_lines(hosts: Sequence[HostRecord]) -> str:
    return "".join(f"{h.address} {h.name}\n" for h in hosts)


def configure(
    state: State, top: Path, client_key: str, env: dict[str, str], log: Log = print
) -> None:
    """Install, configure and start the cluster on its (running) hosts, with its user (who
    logs in with `client_key`); wait until every node is idle in `sinfo`. Safe to run again:
    each step leaves a done step alone."""
    hosts = [state.hosts[name] for name in (CONTROLLER, *NODES)]
    controller, nodes = hosts[0], hosts[1:]
    began = time.monotonic()
    with ThreadPoolExecutor(len(hosts)) as pool:
        list(pool.map(lambda rec: _install(rec, env), hosts))
    log(f"slurm      packages installed in {time.monotonic() - began:.0f}s")
    key_file = top / "slurm" / "munge.key.b64"
    if not key_file.exists():
        key_file.parent.mkdir(mode=0o700, exist_ok=True)
        key_file.write_text(base64.b64encode(os.urandom(1024)).decode() + "\n")
        key_file.chmod(0o600)
    conf = slurm_conf(controller, nodes)
    hosts_file = _hosts_lines(hosts)
    for rec in hosts:
        _sh(rec, "base64 -d >/etc/munge/munge.key.new\n"
            "chown munge:munge /etc/munge/munge.key.new && chmod 0400 /etc/munge/munge.key.new\n"
            "mv /etc/munge/munge.key.new /etc/munge/munge.key\n"
            "systemctl enable --quiet munge && systemctl restart munge\n",
            env, key_file.read_text())  # fmt: skip
        _sh(rec, f"cat >{CONF}.new && chmod 0644 {CONF}.new && mv {CONF}.new {CONF}", env, conf)
        _sh(rec, "grep -v ' slurm-' /etc/hosts >/etc/hosts.new || true\n"
            "cat >>/etc/hosts.new && cat /etc/hosts.new >/etc/hosts && rm /etc/hosts.new",
            env, hosts_file)  # fmt: skip
        users.ensure(rec, ACCOUNT, client_key, env)
    _sh(controller, "systemctl enable --quiet slurmctld && systemctl restart slurmctld", env)
    for rec in nodes:
        _sh(rec, "systemctl enable --quiet slurmd && systemctl restart slurmd", env)
    wait_idle(controller, [n.name for n in nodes], env)
    state.slurm = {"controller": CONTROLLER, "nodes": list(NODES), "user": USER,
                   "shared": str(shared_dir(top))}  # fmt: skip
    log(f"slurm      {', '.join(NODES)} idle in sinfo ({time.monotonic() - began:.0f}s)")


def node_states(controller: HostRecord, env: dict[str, str]) -> dict[str, str]:
    """`sinfo`'s state of each node, as the controller sees it (`idle`, `drained`, ...)."""
    out = run(["podman", "exec", controller.container, "sinfo", "--noheader", "--Node",
               "--format=%N %T"], env=env, check=False)  # fmt: skip
    if out.returncode != 0:
        return {}
    return dict(line.split(None, 1) for line in out.stdout.splitlines() if " " in line)


def wait_idle(controller: HostRecord, names: Sequence[str], env: dict[str, str]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        states = node_states(controller, env)
        if all(states.get(name) == "idle" for name in names):
            return
        if time.monotonic() > deadline:
            seen = " ".join(f"{k}={v}" for k, v in sorted(states.items())) or "no answer"
            raise SandboxError(f"slurm: nodes not idle in sinfo after {READY_TIMEOUT:.0f}s: {seen}")
        time.sleep(1)


def ready(state: State, env: dict[str, str]) -> bool:
    """Whether the recorded cluster answers with every node idle or in use."""
    controller = state.hosts.get(CONTROLLER)
    if not state.slurm or controller is None:
        return False
    states = node_states(controller, env)
    return all(name in states for name in state.slurm["nodes"])


# sinfo's states of a node that takes jobs (a `*` suffix: not responding).
SERVING = {"idle", "mixed", "allocated", "completing"}


def status(state: State, env: dict[str, str]) -> list[dict[str, object]]:
    """`sandbox status` rows for the cluster (none without one): the controller, up when
    `sinfo` answers there, and each node with its sinfo state, up when it takes jobs."""
    controller = state.hosts.get(CONTROLLER)
    if controller is None or not controller.role:
        return []
    states = node_states(controller, env)
    answers = "sinfo answers" if states else "sinfo does not answer"
    rows: list[dict[str, object]] = [
        {"name": "slurmctld", "kind": "slurm", "address": f"{controller.address}:{CTLD_PORT}",
         "up": bool(states), "state": answers}
    ]  # fmt: skip
    for name in NODES:
        seen = states.get(name, "not in sinfo")
        rec = state.hosts.get(name)
        address = f"{rec.address}:{SLURMD_PORT}" if rec else ""
        rows.append({"name": name, "kind": "slurmd", "address": address,
                     "up": seen in SERVING, "state": seen})  # fmt: skip
    return rows


def logins(state: State) -> list[HostRecord]:
    """The SLURM hosts the cluster's user logs in to (each an inventory and ssh_config entry)."""
    return [rec for rec in state.hosts.values() if rec.role]
