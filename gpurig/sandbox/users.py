"""Cluster users in the sandbox: plain accounts without sudo rights (`sudo` installed, as on
every cluster node), with subuid/subgid ranges and Podman for rootless containers, reachable
over SSH with the sandbox's client key. One mechanism for both places users live:
`gpurig sandbox up --user NAME` (on full-1, home in /home, host `full-1-NAME` in the
inventory) and the SLURM cluster's user (on every SLURM host, one uid, home on the shared
directory; hosts `slurm-ctl-alice`, `slurm-1-alice`, ...), each with `scope: user`.

Set up as the node's admins would: Podman with its rootless helpers (uidmap's newuidmap,
slirp4netns), and `/dev/net/tun` usable by users as real distributions ship it (0666; in a
privileged container it is 0600, and slirp4netns then cannot give a container a network).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from gpurig.sandbox.proc import SandboxError, run
from gpurig.sandbox.state import HostRecord, State

NAME = re.compile(r"[a-z_][a-z0-9_-]{0,30}")
PACKAGES = ("podman", "uidmap", "slirp4netns", "dbus-user-session")
SUBIDS = 65536  # subordinate ids per user: one range, the same on every node (from the uid)


@dataclass(frozen=True)
class Account:
    """A cluster user; a cluster fixes its uid (the same on every node) and home (shared)."""

    name: str
    uid: int | None = None  # None: useradd picks
    home: str = ""  # "": /home/NAME

    @property
    def home_dir(self) -> str:
        return self.home or f"/home/{self.name}"


def homes(state: State) -> list[HostRecord]:
    """Where `--user` accounts live: full host 1 of each release the sandbox runs (full-1,
    full-trixie-1, ...), so a release's user scope is tried on that release; full-4 stays
    a fresh rental for onboarding."""
    return [h for h in state.full() if h.index == 1 and not h.role]


def check_name(name: str) -> str:
    """A Unix user name the sandbox can create; SandboxError otherwise."""
    if not NAME.fullmatch(name) or name == "root":
        raise SandboxError(f"--user: not a plain user name (a-z, 0-9, '_', '-'): {name!r}")
    return name


def host_name(host: str, user: str) -> str:
    """The inventory name of `user` on `host`."""
    return f"{host}-{user}"


def setup_script(account: Account, client_key: str) -> str:
    """Root's commands on a host; each step only when missing, so `up` can run it again, on
    every node of a cluster alike (a shared home is made and filled once)."""
    u, home = shlex.quote(account.name), shlex.quote(account.home_dir)
    uid = f"--uid {account.uid} " if account.uid is not None else ""
    return "\n".join(
        [
            "set -e",
            f"for p in {' '.join(PACKAGES)}; do",
            "  dpkg-query -W -f='${Status}' \"$p\" 2>/dev/null | grep -q 'install ok installed' "
            "|| missing=1",
            "done",
            'if [ -n "${missing-}" ]; then',
            "  apt-get update -qq",
            "  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
            f"{' '.join(PACKAGES)} >/dev/null",
            "fi",
            f'mkdir -p "$(dirname {home})"',
            f"id -u {u} >/dev/null 2>&1 || useradd {uid}--user-group --shell /bin/bash "
            f"--home-dir {home} {u}",
            f"if [ ! -d {home} ]; then",
            f"  install -d -m 0750 -o {u} -g {u} {home}",
            f"  cp -rT /etc/skel {home} && chown -R {u}: {home}",
            "fi",
            # useradd gives ranges when login.defs asks; a user made elsewhere may lack them.
            # One range per uid, so a user's files in a shared home map alike on every node.
            f"first=$((100000 + $(id -u {u}) * {SUBIDS}))",
            f"range=$first-$((first + {SUBIDS - 1}))",
            f"grep -q '^{account.name}:' /etc/subuid || usermod --add-subuids \"$range\" {u}",
            f"grep -q '^{account.name}:' /etc/subgid || usermod --add-subgids \"$range\" {u}",
            f"install -d -m 700 -o {u} -g {u} {home}/.ssh",
            f"printf '%s\\n' {shlex.quote(client_key)} > {home}/.ssh/authorized_keys",
            f"chown {u}: {home}/.ssh/authorized_keys && chmod 600 {home}/.ssh/authorized_keys",
            # The home is on the full host's overlayfs, which Podman 5's rootless overlay store
            # cannot sit on (a real node's ext4 or xfs can); vfs, as Podman 4.3 picks there
            # itself. Only where the user has none: a user's own storage.conf is kept.
            f"conf={home}/.config/containers",
            'if [ ! -e "$conf/storage.conf" ]; then',
            f'  install -d -m 700 -o {u} -g {u} {home}/.config "$conf"',
            '  printf \'[storage]\\ndriver = "vfs"\\n\' > "$conf/storage.conf"',
            f'  chown {u}: "$conf/storage.conf"',
            "fi",
            "chmod 666 /dev/net/tun",
        ]
    )


def ensure(rec: HostRecord, account: Account, client_key: str, env: dict[str, str]) -> None:
    """Make `account` on the full host `rec` (idempotent)."""
    script = setup_script(account, client_key)
    run(["podman", "exec", rec.container, "sh", "-c", script], env=env)
