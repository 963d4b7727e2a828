"""Full hosts: privileged Podman containers booting systemd, so a converge can install and
drive real engines (Podman, dockerd) and services inside them."""

from __future__ import annotations

import json
import resource
from pathlib import Path

from gpurig.fsutil import atomic_write
from gpurig.sandbox.keys import ensure_keypair, public_key
from gpurig.sandbox.proc import SandboxError, run
from gpurig.sandbox.rootfs import DEFAULT_RELEASE, host_name
from gpurig.sandbox.state import HostRecord, State

LABEL = "io.gpurig.sandbox"  # value: the host's name
SANDBOX_LABEL = "io.gpurig.sandbox.name"  # value: the sandbox's name
# Full hosts get a network of the sandbox's own (its allocation's subnet), away from Podman's
# default 10.88.0.0/16: a Podman inside a full host makes that default network too, and the
# clash cuts the host off.


def _ulimits() -> str:
    """nofile and nproc within this process's own hard limits: Podman's defaults exceed them
    here, and runc/crun then refuse to start a container (EPERM from setrlimit)."""
    nofile = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 1048576)
    nproc_hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    nproc = min(nproc_hard if nproc_hard != resource.RLIM_INFINITY else pid_max, pid_max)
    return f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'


def containers_conf(path: Path) -> dict[str, str]:
    """Podman settings the sandbox needs, in a file it owns (CONTAINERS_CONF), never the
    machine's: runc (crun fails on hybrid cgroups) and ulimits it can grant."""
    atomic_write(
        path,
        "# Written by gpurig sandbox; used only through CONTAINERS_CONF.\n"
        f"[containers]\n{_ulimits()}"
        '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
        f'[network]\nnetwork_config_dir = "{networks_dir(path)}"\n',
    )
    return {"CONTAINERS_CONF": str(path)}


def inner_containers_conf(path: Path) -> Path:
    """The same ulimits for a Podman that a converge installs inside a full host: the full
    host inherits this machine's limits, which Podman's defaults exceed."""
    atomic_write(path, f"# Written by gpurig sandbox.\n[containers]\n{_ulimits()}")
    return path


def ensure_network(state: State, env: dict[str, str]) -> None:
    """The sandbox's Podman network, on the bridge interface its allocation names."""
    if not network_exists(state.podman_network, env):
        run(["podman", "network", "create", "--subnet", state.podman_subnet,
             state.podman_network], env=env)  # fmt: skip
    # Podman picks the next free cni-podmanN / podmanN, which two sandboxes creating networks
    # at once would both pick; Podman 4.3 (Debian 12) takes no interface name: set it in the
    # config it wrote (CNI's .conflist, or netavark's .json).
    configs = networks_dir(Path(env["CONTAINERS_CONF"]))
    cni = configs / f"{state.podman_network}.conflist"
    if cni.exists():
        data = json.loads(cni.read_text())
        for plugin in data["plugins"]:
            if plugin.get("type") == "bridge":
                plugin["bridge"] = state.podman_interface
        atomic_write(cni, json.dumps(data, indent=2))
    else:
        netavark = configs / f"{state.podman_network}.json"
        data = json.loads(netavark.read_text())
        data["network_interface"] = state.podman_interface
        atomic_write(netavark, json.dumps(data, indent=2))


def networks_dir(conf: Path) -> Path:
    """Where Podman keeps the network configs of the sandbox whose containers.conf is `conf`."""
    return conf.parent / "networks"


def network_exists(name: str, env: dict[str, str]) -> bool:
    return run(["podman", "network", "exists", name], check=False, env=env).returncode == 0


def remove_network(name: str, env: dict[str, str]) -> None:
    if network_exists(name, env):
        run(["podman", "network", "rm", "--force", name], env=env)


def record(state: State, index: int, release: str = DEFAULT_RELEASE) -> HostRecord:
    name = host_name("full", str(index), release)
    container = f"gpurig.{state.name}.{name}"
    return HostRecord(name=name, kind="full", index=index, container=container, release=release)


def running(rec: HostRecord, env: dict[str, str]) -> bool:
    out = run(
        ["podman", "inspect", "--format", "{{.State.Running}}", rec.container],
        check=False,
        env=env,
    )
    return out.returncode == 0 and out.stdout.strip() == "true"


def start(
    rec: HostRecord,
    state: State,
    image: str,
    client_key: Path,
    hosts_dir: Path,
    env: dict[str, str],
) -> None:
    """Boot the container; fills in its address and host key."""
    top = hosts_dir / rec.name
    key = ensure_keypair(top / "ssh_host_ed25519_key", rec.name)
    rec.host_key = public_key(key)
    inner_conf = inner_containers_conf(top / "containers.conf")
    stop(rec, env)
    run(
        [
            "podman", "run", "--detach", "--name", rec.container, "--hostname", rec.name,
            "--label", f"{LABEL}={rec.name}", "--label", f"{SANDBOX_LABEL}={state.name}",
            "--privileged", "--systemd=always", "--network", state.podman_network,
            # Engines inside make their own cgroups; on hybrid cgroups they must see the
            # machine's tree at the paths /proc/self/cgroup names, or runc cannot start.
            "--cgroupns=host", "--volume", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
            "--volume", f"{key}:/etc/ssh/ssh_host_ed25519_key:ro",
            "--volume", f"{client_key}.pub:/root/.ssh/authorized_keys:ro",
            "--volume", f"{inner_conf}:/etc/containers/containers.conf:ro",
            # Engines inside need a real filesystem for their overlay storage.
            "--volume", "/var/lib/containers", "--volume", "/var/lib/docker",
            *(arg for volume in rec.volumes for arg in ("--volume", volume)),
            image, "/sbin/init",
        ],
        env=env,
    )  # fmt: skip
    info = json.loads(run(["podman", "inspect", rec.container], env=env).stdout)[0]
    rec.address = info["NetworkSettings"]["Networks"][state.podman_network]["IPAddress"]
    if not rec.address:
        raise SandboxError(f"{rec.name}: container has no address on Podman's network")


def stop(rec: HostRecord, env: dict[str, str]) -> None:
    """Remove the container (only if it carries our label) and its anonymous volumes."""
    out = run(
        ["podman", "inspect", "--format", f'{{{{index .Config.Labels "{LABEL}"}}}}', rec.container],
        check=False,
        env=env,
    )
    if out.returncode == 0 and out.stdout.strip() == rec.name:
        run(["podman", "rm", "--force", "--volumes", "--time", "0", rec.container], env=env)
