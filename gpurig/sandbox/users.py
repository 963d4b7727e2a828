"""Cluster users in the sandbox (`gpurig sandbox up --user NAME`): a plain account on full-1
without sudo rights (`sudo` installed, as on every cluster node), with subuid/subgid ranges
and Podman for rootless containers, reachable over SSH with the sandbox's client key, and
recorded in the inventory as host `full-1-NAME` with `scope: user`.

Set up as the node's admins would: Podman with its rootless helpers (uidmap's newuidmap,
slirp4netns), and `/dev/net/tun` usable by users as real distributions ship it (0666; in a
privileged container it is 0600, and slirp4netns then cannot give a container a network).
"""

from __future__ import annotations

import re
import shlex

from gpurig.sandbox.proc import SandboxError, run
from gpurig.sandbox.state import HostRecord

HOST = "full-1"  # the full host users live on; full-4 stays a fresh rental for onboarding
NAME = re.compile(r"[a-z_][a-z0-9_-]{0,30}")
PACKAGES = "podman uidmap slirp4netns dbus-user-session"


def check_name(name: str) -> str:
    """A Unix user name the sandbox can create; SandboxError otherwise."""
    if not NAME.fullmatch(name) or name == "root":
        raise SandboxError(f"--user: not a plain user name (a-z, 0-9, '_', '-'): {name!r}")
    return name


def host_name(host: str, user: str) -> str:
    """The inventory name of `user` on `host`."""
    return f"{host}-{user}"


def setup_script(user: str, client_key: str) -> str:
    """Root's commands on the host; each step only when missing, so `up` can run it again."""
    u, home = shlex.quote(user), shlex.quote(f"/home/{user}")
    return "\n".join(
        [
            "set -e",
            f"for p in {PACKAGES}; do",
            "  dpkg-query -W -f='${Status}' \"$p\" 2>/dev/null | grep -q 'install ok installed' "
            "|| missing=1",
            "done",
            'if [ -n "${missing-}" ]; then',
            "  apt-get update -qq",
            "  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
            f"{PACKAGES} >/dev/null",
            "fi",
            f"id -u {u} >/dev/null 2>&1 || useradd --create-home --shell /bin/bash {u}",
            # useradd gives ranges when login.defs asks; a user made elsewhere may lack them.
            f"grep -q '^{user}:' /etc/subuid || usermod --add-subuids 200000-265535 {u}",
            f"grep -q '^{user}:' /etc/subgid || usermod --add-subgids 200000-265535 {u}",
            f"install -d -m 700 -o {u} -g {u} {home}/.ssh",
            f"printf '%s\\n' {shlex.quote(client_key)} > {home}/.ssh/authorized_keys",
            f"chown {u}: {home}/.ssh/authorized_keys && chmod 600 {home}/.ssh/authorized_keys",
            "chmod 666 /dev/net/tun",
        ]
    )


def ensure(rec: HostRecord, user: str, client_key: str, env: dict[str, str]) -> None:
    """Make `user` on the full host `rec` (idempotent)."""
    run(["podman", "exec", rec.container, "sh", "-c", setup_script(user, client_key)], env=env)
