"""One converge at a time per host. The lock is a `flock` on the host held by a command on
its own SSH channel for as long as this converge is connected: when the run ends, or the
machine running it dies or loses the network, sshd ends the session and the lock goes with it,
so a killed converge never leaves a stale lock behind."""

from __future__ import annotations

import shlex

from pyinfra import host

from gpurig.user_scope import is_user, lock_command

LOCK = "/run/gpurig-converge.lock"
BUSY = 75  # flock -E: the lock is held by another converge
# By host name: the channels must outlive the deploy file's run, until pyinfra disconnects.
_HELD: dict[str, object] = {}


def hold_command(spec: dict, sudo: bool) -> str:
    """A command that prints `held` once it holds the converge lock, and keeps it until its
    stdin closes (exit BUSY when another converge holds it); scope: user takes the user's
    own lock, without sudo."""
    hold_it = "sh -c 'echo held; exec cat >/dev/null'"
    if is_user(spec):
        return lock_command(BUSY, hold_it)
    return f"{'sudo -n ' if sudo else ''}flock -n -E {BUSY} {shlex.quote(LOCK)} {hold_it}"


def hold() -> str | None:
    """Take the host's converge lock; None when held (or the connector is not SSH), else why
    the host must be left alone."""
    client = getattr(host.connector, "client", None)
    if client is None or host.name in _HELD:
        return None
    sudo = host.data.get("ssh_user") not in (None, "root")
    command = hold_command(host.data.get("spec") or {}, sudo)
    channel = client.get_transport().open_session()
    channel.exec_command(command)
    answer = channel.makefile("r").readline().strip()
    if answer == "held":
        _HELD[host.name] = channel
        return None
    status = channel.recv_exit_status()
    channel.close()
    if status == BUSY:
        return f"another converge is running on this host (it holds {LOCK}); try again when it ends"
    return f"could not take the converge lock {LOCK} (exit {status}; is flock installed?)"
