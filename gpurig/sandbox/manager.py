"""`gpurig sandbox up|down|status|list`: bring a named sandbox to a size, report it, remove
it; list and remove every sandbox by its records."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpurig.fsutil import atomic_write
from gpurig.sandbox import fleet, full, net, registry, rootfs, slurm, users
from gpurig.sandbox.alloc import choose, machine_in_use, machine_lock
from gpurig.sandbox.keys import ensure_keypair, public_key
from gpurig.sandbox.proc import SandboxError, alive, kill, run, wait_port, wait_port_in
from gpurig.sandbox.services import SERVICES, url
from gpurig.sandbox.state import (
    HostRecord,
    State,
    load,
    register,
    registered,
    save,
    unregister,
)

Log = Callable[[str], None]
BEHIND_LOGIN = "behind-login"  # the inventory group that carries the login node's ssh.jump


@dataclass(frozen=True)
class Paths:
    """The sandbox's files, all below one directory it owns."""

    top: Path

    @property
    def state(self) -> Path:
        return self.top / "state.json"

    @property
    def hosts(self) -> Path:
        return self.top / "hosts"

    def lower(self, release: str) -> Path:
        """The release's rootfs, the read-only lower layer of its fleet hosts."""
        return self.top / f"rootfs-{release}"

    @property
    def client_key(self) -> Path:
        return self.top / "client_ed25519"

    @property
    def inventory(self) -> Path:
        return self.top / "inventory.yaml"

    @property
    def ssh_config(self) -> Path:
        return self.top / "ssh_config"

    @property
    def known_hosts(self) -> Path:
        return self.top / "known_hosts"

    def podman_env(self) -> dict[str, str]:
        return full.containers_conf(self.top / "containers.conf")


def _require_root_and_tools(*tools: str) -> None:
    if os.geteuid() != 0:
        raise SandboxError("the sandbox makes namespaces and containers: run it as root")
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        raise SandboxError(f"missing tools: {', '.join(missing)} (see README: test command)")


def _healthy(rec: HostRecord, env: dict[str, str]) -> bool:
    if rec.kind == "fleet":
        return alive(rec.pid, rec.started) and net.netns_exists(rec.netns)
    return bool(rec.address) and full.running(rec, env)


def _claim(paths: Paths, state: State, name: str) -> None:
    """Give the sandbox its slot (bridge, subnets, ports) if it has none, and bring up the
    bridge that claims it, under the machine-wide lock."""
    if state.bridge and state.slot is None:
        raise SandboxError(
            f"{paths.top} was made by an older gpurig (bridge {state.bridge}): "
            f"`gpurig sandbox down --dir {paths.top}`, then up again"
        )
    with machine_lock():
        if state.slot is None:
            mine = paths.top.resolve()
            slots = [load(t / "state.json").slot for t in registered().values() if t != mine]
            state.allocate(choose(name, machine_in_use(s for s in slots if s is not None)))
            save(paths.state, state)
        net.ensure_bridge(state.bridge, state.gateway, state.network)


def up(
    top: Path,
    name: str,
    fleet_hosts: int,
    full_hosts: int,
    log: Log = print,
    behind_login: int = 0,
    cluster_users: Sequence[str] = (),
    with_slurm: bool = False,
    release: str = rootfs.DEFAULT_RELEASE,
) -> State:
    """Make sure the sandbox `name` (kept in `top`) runs at least `fleet_hosts` +
    `full_hosts` hosts of Debian `release` (each release's hosts have names of their own,
    so releases run side by side), with `behind_login` a login node and that many hosts
    reachable only through it, and the cluster users asked for now or before (on full host 1
    of each release, see gpurig.sandbox.users), and with `with_slurm` its SLURM cluster
    (three more full hosts; once made, every `up` keeps it); repair what a killed run left.

    Idempotent: healthy hosts are left alone, missing ones made, broken ones restarted (and
    with a restarted login node, the hosts behind it: their links went with it).
    """
    _require_root_and_tools("ip", "unshare", "ssh-keygen", "docker-registry", "podman")
    rootfs.check_release(release)
    paths = Paths(top)
    register(name, top)
    top.mkdir(parents=True, exist_ok=True)
    state = load(paths.state)
    state.name = name
    state.users += [users.check_name(u) for u in cluster_users if u not in state.users]
    if state.users and full_hosts < 1 and not state.full():
        raise SandboxError("--user needs a full host (--full 1 or more): users live on full-1")
    _claim(paths, state, name)
    ensure_keypair(paths.client_key, "gpurig-sandbox")

    for service_name, service in SERVICES.items():
        if not alive(*state.services.get(service_name, [None, None])):
            (paths.top / service_name).mkdir(exist_ok=True)
            where = state.endpoint(service_name)
            state.services[service_name] = list(service.start(paths.top / service_name, *where))
            save(paths.state, state)
            log(f"{service_name:<10} {url(state, service_name)}")
    if "train" not in state.images:
        state.local_image = f"localhost/gpurig.{name}/train:1"
        save(paths.state, state)
        state.images["train"] = registry.seed(
            url(state, "registry"), state.local_image, paths.podman_env()
        )
        save(paths.state, state)
        log(f"image      {state.images['train']}")

    wanted = [fleet.record(state, i, release) for i in range(1, fleet_hosts + 1)]
    wanted += [full.record(state, i, release) for i in range(1, full_hosts + 1)]
    if behind_login:  # the login node first: the hosts behind it are wired to it
        wanted.append(fleet.login_record(state))
        wanted += [fleet.behind_record(state, i) for i in range(1, behind_login + 1)]
    if with_slurm:
        for rec in slurm.records(state):
            rec.volumes = slurm.volumes(paths.top)
            wanted.append(rec)
    for rec in wanted:
        state.hosts.setdefault(rec.name, rec)
    env = paths.podman_env()
    lowers = {r: rootfs.extract(paths.lower(r), r) for r in state.releases("fleet")}
    for lower in lowers.values():
        fleet.prepare_lower(lower, paths.client_key)
    images = {r: rootfs.image(env, r) for r in state.releases("full")}
    if images:
        full.ensure_network(state, env)

    started: list[HostRecord] = []
    for rec in state.hosts.values():
        if _healthy(rec, env) and rec.via not in {s.name for s in started}:
            continue
        save(paths.state, state)  # the intent is on record before anything is made
        if rec.kind == "fleet":
            fleet.stop(rec)
            fleet.start(rec, state, lowers[rec.release], paths.hosts)
        else:
            full.start(rec, state, images[rec.release], paths.client_key, paths.hosts, env)
        save(paths.state, state)
        started.append(rec)

    deadline = time.monotonic() + 60
    for rec in started:
        left = max(1.0, deadline - time.monotonic())
        if rec.via:  # only the login node reaches it: ask from there
            answers = wait_port_in(state.hosts[rec.via].netns, rec.address, 22, left)
        else:
            answers = wait_port(rec.address, 22, timeout=left)
        if not answers:
            raise SandboxError(f"{rec.name}: sshd is not answering at {rec.address}:22")
    for home in users.homes(state):
        for user in state.users:
            users.ensure(home, users.Account(user), public_key(paths.client_key), env)
    write_access_files(paths, state)
    with_slurm = with_slurm or any(rec.role for rec in state.hosts.values())
    if with_slurm and (any(rec.role for rec in started) or not slurm.ready(state, env)):
        state.slurm = {}
        save(paths.state, state)
        slurm.configure(state, paths.top, public_key(paths.client_key), env, log)
        save(paths.state, state)
    behind = [h for h in state.hosts.values() if h.via]
    login = f", {len(behind)} behind {fleet.LOGIN}" if behind else ""
    log(
        f"up: {name}: {len(state.fleet()) - len(behind)} fleet{login}, {len(state.full())} full "
        f"({len(started)} started) on {state.bridge} {state.network}"
    )
    log(f"inventory  {paths.inventory}")
    return state


def write_access_files(paths: Paths, state: State) -> None:
    """The inventory (host keys recorded, so connections are strictly checked), a
    known_hosts file and an ssh_config for plain ssh and testinfra."""
    hosts = sorted(state.hosts.values(), key=lambda h: (h.kind, h.via, h.index))
    groups: dict[str, dict] = {
        # Fleet hosts are bare namespaces: no engine, no systemd, no GPU.
        "fleet": {"spec": {"engine": "none", "gpu": "absent"}},
        "full": {"spec": {"gpu": "absent"}},
    }
    login = state.hosts.get(fleet.LOGIN)
    if login:  # its hosts' one way in, its host key pinned
        jump = {"address": login.address, "host_key": login.host_key}
        groups[BEHIND_LOGIN] = {"ssh": {"jump": jump}}
    inventory = {
        "version": 1,
        "defaults": {"ssh": {"user": "root", "key": str(paths.client_key)}},
        "groups": groups,
        "hosts": {
            h.name: {
                "address": h.address,
                "ssh": {"host_key": h.host_key},
                "groups": [h.kind, BEHIND_LOGIN] if h.via else [h.kind],
            }
            for h in hosts
        },
    }
    logins = [(h.name, "root", h) for h in hosts]
    accounts = [(home, user) for home in users.homes(state) for user in state.users]
    accounts += [(rec, slurm.USER) for rec in slurm.logins(state)]
    for rec, user in accounts:
        name = users.host_name(rec.name, user)
        ssh = {"user": user, "host_key": rec.host_key}
        entry = {"address": rec.address, "ssh": ssh, "groups": [rec.kind]}
        inventory["hosts"][name] = {**entry, "spec": {"scope": "user"}}
        logins.append((name, user, rec))
    header = "# Written by `gpurig sandbox up`; rewritten on every up.\n"
    atomic_write(paths.inventory, header + yaml.safe_dump(inventory, sort_keys=False))
    atomic_write(paths.known_hosts, "".join(f"{h.address} {h.host_key}\n" for h in hosts))
    atomic_write(
        paths.ssh_config,
        "".join(
            f"Host {name}\n  HostName {h.address}\n  User {user}\n"
            f"  IdentityFile {paths.client_key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {paths.known_hosts}\n  StrictHostKeyChecking yes\n"
            + (f"  ProxyJump {h.via}\n" if h.via else "")
            for name, user, h in logins
        ),
    )


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path.resolve()) + "/"
    with open("/proc/self/mounts") as f:
        return [p for p in (line.split()[1] for line in f) if p.startswith(prefix)]


def _remove_hosts(paths: Paths, state: State, hosts: list[HostRecord], env: dict[str, str]) -> None:
    """Stop each host and drop its record, one at a time, so a killed run leaves records of
    exactly what still runs."""
    for rec in hosts:
        if rec.kind == "fleet":
            fleet.stop(rec)
        else:
            full.stop(rec, env)
        del state.hosts[rec.name]
        save(paths.state, state)


def down(top: Path, log: Log = print) -> None:
    """Remove exactly what the records say was made: processes, namespaces, links,
    containers, the registry, then the sandbox's own directory and its index entry."""
    paths = Paths(top)
    if not paths.state.exists():
        log(f"down: no sandbox in {top}")
        return
    _require_root_and_tools("ip")
    state = load(paths.state)
    env = paths.podman_env()
    _remove_hosts(paths, state, list(state.hosts.values()), env)
    if state.podman_network:
        full.remove_network(state.podman_network, env)
    for pid, started in state.services.values():
        kill(pid, started)
    if state.local_image:
        run(["podman", "rmi", "--force", state.local_image], check=False, env=env)
    for link in (state.podman_interface, state.bridge):
        if link:
            net.remove_link(link)
    leftover = _mounts_under(top)
    if leftover:
        raise SandboxError(f"refusing to delete {top}: still mounted: {', '.join(leftover)}")
    real = top.resolve()
    shutil.rmtree(real)
    if state.name:
        unregister(state.name, real)
    log(f"down: sandbox {state.name or top} removed")


def down_release(top: Path, release: str, log: Log = print) -> None:
    """Remove the hosts of one release other than the default (`down --release`), by the
    records, with their directories; the sandbox, its services and other hosts keep running."""
    if rootfs.check_release(release) == rootfs.DEFAULT_RELEASE:
        raise SandboxError(f"--release {release}: the sandbox's own release; `down` removes all")
    paths = Paths(top)
    state = load(paths.state)
    gone = [h for h in state.hosts.values() if h.release == release]
    _remove_hosts(paths, state, gone, paths.podman_env())
    for rec in gone:
        shutil.rmtree(paths.hosts / rec.name, ignore_errors=True)
        log(f"down: {rec.name} removed")
    shutil.rmtree(paths.lower(release), ignore_errors=True)
    write_access_files(paths, state)


def down_all(log: Log = print) -> None:
    """`down` every sandbox the index knows; one that fails does not stop the others."""
    failed = []
    for name, top in registered().items():
        try:
            down(top, log)
        except SandboxError as e:
            failed.append(f"{name}: {e}")
    if failed:
        raise SandboxError("; ".join(failed))


def status(top: Path) -> list[dict[str, object]]:
    """One row per service and per recorded host, with whether it is up; with a SLURM
    cluster, a row for its controller and one per node (with its `state` in sinfo)."""
    paths = Paths(top)
    state = load(paths.state)
    env = paths.podman_env() if state.full() else {}
    rows: list[dict[str, object]] = [
        {
            "name": name,
            "kind": "service",
            "address": url(state, name) if state.ports else "",
            "up": alive(*state.services.get(name, [None, None])),
        }
        for name in SERVICES
    ]
    for rec in sorted(state.hosts.values(), key=lambda h: (h.kind, h.index)):
        rows.append(
            {
                "name": rec.name,
                "kind": rec.kind,
                "release": rec.release,
                "address": rec.address,
                "up": _healthy(rec, env),
            }
        )
    return rows + slurm.status(state, env)


def listing() -> list[dict[str, object]]:
    """One row per sandbox in the index: where it lives, what it owns, whether it runs."""
    rows: list[dict[str, object]] = []
    for name, top in registered().items():
        state = load(Paths(top).state)
        up = [row["up"] for row in status(top)]
        rows.append(
            {
                "name": name,
                "dir": str(top),
                "bridge": state.bridge,
                "subnet": state.network,
                "hosts": len(state.hosts),
                "status": "up" if all(up) else "down" if not any(up) else "degraded",
            }
        )
    return rows


def purge_cache(env: dict[str, str]) -> None:
    """Drop the cached rootfs tarballs and host images of every release (the next `up`
    rebuilds what it needs). An image stays while another sandbox's full hosts run on it (no
    --force)."""
    shutil.rmtree(rootfs.cache_dir(), ignore_errors=True)
    if shutil.which("podman"):
        for release in rootfs.RELEASES:
            run(["podman", "rmi", rootfs.image_ref(release)], check=False, env=env)
