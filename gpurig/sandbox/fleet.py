"""Fleet hosts: sshd as the first process of its own pid, mount, uts and ipc namespaces,
inside a network namespace, on an overlay of the shared rootfs. About 2 MB each."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpurig.sandbox import net
from gpurig.sandbox.keys import ensure_keypair, public_key
from gpurig.sandbox.proc import SandboxError, children, kill, start_time
from gpurig.sandbox.rootfs import DEFAULT_RELEASE, RELEASES, host_name
from gpurig.sandbox.state import HostRecord, State

# Runs inside the new namespaces; the mounts vanish with them, so nothing leaks to the machine.
LAUNCH = r"""
set -e
lower=$1 dir=$2 name=$3
m=$dir/merged
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$dir/upper,workdir=$dir/work" "$m"
mount -t proc proc "$m/proc"
mount -t sysfs sysfs "$m/sys"
mount -t tmpfs -o mode=755 tmpfs "$m/run"
mkdir -p "$m/run/sshd"
mount -t tmpfs -o mode=1777 tmpfs "$m/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$m/dev/pts"
mount --bind "$m/dev/pts/ptmx" "$m/dev/ptmx"
hostname "$name"
exec chroot "$m" /usr/sbin/sshd -D -e
"""

LOGIN = "login"  # the login node's host name (`sandbox up --behind-login N`)

FLEET_SSHD_CONFIG = "# No PAM: the host has no login session machinery, only sshd.\nUsePAM no\n"


def prepare_lower(lower: Path, client_key: Path) -> None:
    """Settings every fleet host shares, written into the sandbox's own rootfs copy."""
    (lower / "etc/ssh/sshd_config.d/gpurig-fleet.conf").write_text(FLEET_SSHD_CONFIG)
    ssh_dir = lower / "root/.ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(Path(f"{client_key}.pub").read_text())


# Fleet hosts of each release number from their own thousand (at most 1000 per `up`), so
# their addresses and veth names never meet: bookworm's 1..1000, bullseye's 1001..2000, ...
RELEASE_SPAN = 1000


def record(state: State, index: int, release: str = DEFAULT_RELEASE) -> HostRecord:
    """Fleet host `index` of the sandbox on `release`: its address on the sandbox's bridge,
    and a netns and veth named after the sandbox (veth names have 15 characters: the slot
    stands in)."""
    name = host_name("fleet", f"{index:03d}", release)
    order = [DEFAULT_RELEASE, *(r for r in RELEASES if r != DEFAULT_RELEASE)]
    number = index + RELEASE_SPAN * order.index(release)
    return HostRecord(
        name=name,
        kind="fleet",
        index=index,
        address=net.host_address(state.network, number),
        netns=f"gpurig.{state.name}.{name}",
        veth=f"gv{state.slot}-{number}",
        release=release,
    )


def login_record(state: State) -> HostRecord:
    """The login node: a fleet host on the bridge with a leg on the private network."""
    return HostRecord(
        name=LOGIN,
        kind="fleet",
        index=0,
        address=net.login_address(state.network),
        netns=f"gpurig.{state.name}.{LOGIN}",
        veth=f"gv{state.slot}-{LOGIN}",
    )


def behind_record(state: State, index: int) -> HostRecord:
    """Host `index` behind the login node, on the private network only. Its veth pair runs
    from its namespace to the login node's, so this machine holds no end of it (no `veth`)."""
    name = f"node-{index:03d}"
    return HostRecord(
        name=name,
        kind="fleet",
        index=index,
        address=net.behind_address(state.network, index),
        netns=f"gpurig.{state.name}.{name}",
        via=LOGIN,
    )


def start(rec: HostRecord, state: State, lower: Path, hosts_dir: Path) -> None:
    """Create the host's namespaces and start its sshd; fills in pid, start time, host key.
    A host behind the login node needs the login node started first."""
    top = hosts_dir / rec.name
    for sub in ("upper/etc/ssh", "work", "merged"):
        (top / sub).mkdir(parents=True, exist_ok=True)
    key = ensure_keypair(top / "upper/etc/ssh/ssh_host_ed25519_key", rec.name)
    rec.host_key = public_key(key)
    if rec.via:
        login = state.hosts[rec.via]
        net.create_behind_netns(rec.netns, rec.address, login.netns, f"n{rec.index}", state.network)
    else:
        net.create_netns(rec.netns, rec.veth, rec.address, state.bridge, state.network)
    if rec.name == LOGIN:
        net.create_private_bridge(rec.netns, state.network)
    with open(top / "sshd.log", "ab") as log:
        launcher = subprocess.Popen(
            [
                "ip", "netns", "exec", rec.netns,
                "unshare", "--mount", "--pid", "--uts", "--ipc", "--fork",
                "--propagation", "private",
                "sh", "-c", LAUNCH, "launch", str(lower), str(top), rec.name,
            ],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        )  # fmt: skip
    # The namespace's init (our sshd) is the child of `unshare`, which `ip` execs into.
    kids = children(launcher.pid)
    if not kids:
        raise SandboxError(f"{rec.name}: sshd did not start; see {top / 'sshd.log'}")
    rec.pid, rec.started = kids[0], start_time(kids[0])


def stop(rec: HostRecord) -> None:
    """Kill the namespace init (taking every process and mount with it), drop the network.
    The host's directory (its overlay upper layer and host key) stays for a restart."""
    kill(rec.pid, rec.started)
    net.remove_netns(rec.netns, rec.veth)
