"""User scope (`spec.scope: user`): gpurig acts as the login user alone, without root or sudo,
as a cluster account does (a SLURM user who otherwise starts Podman's API by hand).

What such a user owns is converged: the user's rootless Podman API socket, a block in the
user's login profile (core dumps off, DOCKER_HOST), checkouts and environments in paths the
user can write, the user's own leftovers, containers through the rootless engine. What needs
root is refused by `gpurig validate` (`root_only`); what the user can read is still checked.

Where the socket lives is decided on the host, by one shell rule every command shares (the
plans read by the spec alone, so no command can wait for a fact to name the path):
- a lingering user (`loginctl enable-linger`) has a `systemd --user` manager for good:
  `podman.socket` listens at `/run/user/UID/podman/podman.sock`;
- otherwise gpurig supervises `podman system service --time=0` itself, in Podman's own
  runtime directory for a user without one, `/tmp/podman-run-UID` (node-local, outlives the
  login session that started it: `/run/user/UID` goes when the last session ends).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from typing import Any

from gpurig.spec.pattern import lazy

# The user's Podman runtime directory on this node (see above), as a shell expression.
RUNTIME_DIR = (
    '$(if [ -e "/var/lib/systemd/linger/$(id -un)" ]; then echo "/run/user/$(id -u)"; '
    'else echo "/tmp/podman-run-$(id -u)"; fi)'
)
SOCKET = f"{RUNTIME_DIR}/podman/podman.sock"
# gpurig's supervised service records its pid here, in /tmp/podman-run-UID.
PID_FILE = "gpurig-podman.pid"


# What the lock command prints when the runtime directory is not the user's own: its owner's
# uid, `link` or `missing` (it could not be made), the user's name and the directory.
NOT_OWN = lazy(r"not-own (link|missing|[0-9]{1,10}) ([A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}) "
                     r"(/[^\x00-\x1f\x7f]{1,200})")  # fmt: skip


# One converge at a time per user and node: a lock in the user's (node-local) runtime
# directory, made if missing and used only when it is the user's own.
def lock_command(busy: int, command: str) -> str:
    """`command` run under the user's converge lock (flock exits `busy` when it is held);
    where the runtime directory is not the user's, a NOT_OWN line and exit 1."""
    return (
        f'run={RUNTIME_DIR}; if [ ! -L "$run" ] && mkdir -p -m 700 "$run" 2>/dev/null && '
        f'[ -O "$run" ]; then exec flock -n -E {busy} "$run/gpurig-converge.lock" {command}; fi; '
        'owner=link; [ -L "$run" ] || owner=$(stat -c %u "$run" 2>/dev/null) || owner=missing; '
        'echo "not-own $owner $(id -un) $run"; exit 1'
    )


# Every podman gpurig runs as the user goes through the API socket (CONTAINER_HOST makes
# Podman 4 a remote client): a second local podman with another runtime directory would
# join the service's user namespace and break it ("XDG_RUNTIME_DIR ... is not owned").
CONTAINER_HOST = f'CONTAINER_HOST="unix://{SOCKET}"'

# Shell functions the fact (facts/gpurig_user.py) and the converge (deploys/engine.py) share, so
# both judge gpurig's supervised service the same way. `service_pid` prints the pid in the
# pid file only while that process is still this service (a reused pid is someone else's):
# its command line ends with the service's arguments.
SERVICE_SH = f"""\
sup=/tmp/podman-run-$(id -u)
sup_sock="$sup/podman/podman.sock"
service_args="system service --time=0 unix://$sup_sock"
service_pid() {{
  p=$(head -c 20 "$sup/{PID_FILE}" 2>/dev/null)
  case $p in '' | *[!0-9]*) return 0 ;; esac
  case "$(tr '\\0' ' ' < "/proc/$p/cmdline" 2>/dev/null)" in
    *" $service_args ") echo "$p" ;;
  esac
}}
answers() {{
  [ -S "$1" ] && [ "$(curl -s --max-time 5 --unix-socket "$1" http://d/_ping 2>/dev/null)" = OK ]
}}
"""

# The login file bash reads (the first of these that exists; ~/.profile when none does), as a
# shell snippet that sets $login: the fact and the converge pick the same file. gpurig's
# lines sit in it between markers, one block per concern.
LOGIN_FILE_SH = (
    "login=; for f in .bash_profile .bash_login .profile; do "
    '[ -e "$HOME/$f" ] && { login=$f; break; }; done; login=${login:-.profile}'
)
BEGIN = "# >>> gpurig {name} (written by gpurig: edits here are replaced) >>>"
END = "# <<< gpurig {name} <<<"
# Login shells reach the user's Podman through its socket, docker CLI and podman alike.
DOCKER_HOST_LINES = [
    f'DOCKER_HOST="unix://{SOCKET}"',
    'CONTAINER_HOST="$DOCKER_HOST"',
    "export DOCKER_HOST CONTAINER_HOST",
]

# The user's registries drop-in (Podman reads ~/.config/containers/registries.conf.d).
REGISTRIES = "~/.config/containers/registries.conf.d/90-gpurig.conf"

# What a user-scope spec may not declare, and why: each needs root.
ROOT_ONLY = {
    "packages": "installing packages needs root (apt); ask the cluster's admins for them",
    "nvidia_toolkit": "the NVIDIA container toolkit is installed with apt and configured in "
    "/etc, which needs root",
    "compose": "the compose plugin is installed in /usr/local/lib/docker/cli-plugins, which "
    "needs root",
    "engine": "Docker's daemon runs as root; use engine: podman (the user's rootless Podman) "
    "or none",
    "hold": "holding driver packages (apt-mark, /etc/apt) needs root; hold: false checks the "
    "driver read-only",
    "owner": "changing a file's owner needs root; the user's files are its own",
    "podman_socket": "containers run through the user's Podman API socket; leave "
    "podman_socket true",
}


def shell_path(path: str) -> str:
    """`path` quoted for sh; `~/...` (a user's file) is expanded there, from $HOME."""
    if path.startswith("~/"):
        return f'"$HOME"/{shlex.quote(path[2:])}'
    return shlex.quote(path)


def is_user(spec: Mapping[str, Any]) -> bool:
    """Whether a (normalised) spec acts as the login user only."""
    return spec.get("scope") == "user"


def root_only(spec: Mapping[str, Any]) -> Iterator[tuple[tuple[Any, ...], str]]:
    """(key path in the spec, why) for each item of a normalised user-scope spec that needs
    root; nothing for a system-scope spec."""
    if not is_user(spec):
        return
    found: list[tuple[Any, ...]] = [
        (key,) for key in ("packages", "nvidia_toolkit", "compose") if spec.get(key)
    ]
    if spec.get("engine") == "docker":
        found.append(("engine",))
    if (spec.get("driver") or {}).get("hold"):
        found.append(("driver", "hold"))
    found += [("secrets", i, "owner") for i, s in enumerate(spec["secrets"]) if s.get("owner")]
    if spec["containers"] and spec["engine"] == "podman" and not spec["podman_socket"]:
        found.append(("podman_socket",))
    for path in found:
        yield path, f"refused with scope: user: {ROOT_ONLY[path[-1]]}"
