"""One converge at a time per host. The lock is a `flock` on the host held by a command on
its own SSH channel for as long as this converge is connected: when the run ends, or the
machine running it dies or loses the network, sshd ends the session and the lock goes with it,
so a killed converge never leaves a stale lock behind.

The host's answer is untrusted and may never come: it is read as bytes, at most one short
line, within a timeout; whatever goes wrong refuses this host alone (an exception here would
stop pyinfra's whole run)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from paramiko.ssh_exception import SSHException
from pyinfra import host
from pyinfra.connectors.util import SUDO_PASSWORD_REQUIRED_LINES

from gpurig.change import findings
from gpurig.node_checks import sudo_refused_message
from gpurig.plans.engine import squatted
from gpurig.report import one_line
from gpurig.user_scope import NOT_OWN, is_user, lock_command

# In a directory only root may enter: any local user could otherwise hold the lock.
LOCK_DIR = "/run/gpurig"
LOCK = f"{LOCK_DIR}/converge.lock"
# A login without root or sudo locks its own runs only, in a directory it owns.
USER_LOCK = '"${XDG_RUNTIME_DIR:-$HOME/.cache}/gpurig/converge.lock"'
BUSY = 75  # flock -E: the lock is held by another converge
TIMEOUT = 30  # seconds for the host to answer
HELD = b"held"
# By host name: the channels must outlive the deploy file's run, until pyinfra disconnects.
_HELD: dict[str, object] = {}


def hold_command(spec: Mapping[str, Any], sudo: bool, as_root: bool = True) -> str:
    """The command that takes the lock, says `held`, and keeps it until its stdin closes
    (exit BUSY when another converge holds it): scope: user takes the user's own lock (the one
    its Podman service starts under), a root login root's, any other login its own."""
    hold_it = "sh -c 'echo held; exec cat >/dev/null'"
    if is_user(spec):
        return lock_command(BUSY, hold_it)
    hold = f'flock -n -E {BUSY} "$lock" {hold_it}'
    if as_root:
        private = f"mkdir -p {LOCK_DIR} && chmod 700 {LOCK_DIR}"
        script = f"umask 077 && {private} && lock={LOCK} && {hold}"
    else:
        script = f'umask 077 && lock={USER_LOCK} && mkdir -p "${{lock%/*}}" && {hold}'
    # sudo is asked first with stdin closed: a refusal (its password line) comes back at once,
    # not once the lock's open stdin ends.
    return f"{'sudo -n true </dev/null && sudo -n ' if sudo else ''}sh -c {shlex.quote(script)}"


def not_own(answer: str) -> str | None:
    """Why the user's lock was refused, in drift's words, when the lock command's answer says
    the runtime directory is not the user's (user_scope.NOT_OWN); None for any other answer."""
    match = NOT_OWN.fullmatch(answer)
    if match is None:
        return None
    owner, user, directory = match.groups()
    if owner == "missing":
        return f"{directory}, {user}'s runtime directory, is missing and could not be made"
    return one_line(findings([squatted(directory, owner, user)])[0])


def _sudo_refused(channel: object) -> bool:
    """Whether the lock command's stderr (its first few hundred bytes) is sudo asking for a
    password."""
    data = b""
    while channel.recv_stderr_ready() and len(data) < 512:  # type: ignore[attr-defined]
        data += channel.recv_stderr(512 - len(data))  # type: ignore[attr-defined]
    lines = data.decode("utf-8", "replace").splitlines()
    return any(line.strip() in SUDO_PASSWORD_REQUIRED_LINES for line in lines)


def first_line(channel: object, limit: int = 64) -> bytes | None:
    """The first line the channel prints (at most `limit` bytes), or None if it closed or
    stayed silent for TIMEOUT seconds."""
    data = b""
    try:
        while b"\n" not in data and len(data) < limit:
            chunk = channel.recv(limit - len(data))  # type: ignore[attr-defined]
            if not chunk:
                return None
            data += chunk
    except TimeoutError:  # socket.timeout, raised by a channel with a timeout
        return None
    return data.split(b"\n", 1)[0].strip()


def hold() -> str | None:
    """Take the host's converge lock; None when held (or the connector is not SSH), else why
    the host must be left alone."""
    client = getattr(host.connector, "client", None)
    if client is None or host.name in _HELD:
        return None
    sudo = bool(host.data.get("_sudo"))
    as_root = sudo or host.data.get("ssh_user") in (None, "root")
    where = LOCK if as_root else "the login's own converge lock"
    try:
        channel = client.get_transport().open_session(timeout=TIMEOUT)
        channel.settimeout(TIMEOUT)
        channel.exec_command(hold_command(host.data.get("spec") or {}, sudo, as_root))
        answer = first_line(channel, 320)  # a NOT_OWN line names a directory
        if answer == HELD:
            _HELD[host.name] = channel
            return None
        status = channel.exit_status if channel.status_event.wait(TIMEOUT) else None
        asked = sudo and _sudo_refused(channel)
        channel.close()
    except (OSError, EOFError, SSHException) as exc:
        return f"could not take the converge lock {where}: {exc or type(exc).__name__}"
    if asked:
        return sudo_refused_message(host.name)
    said = (answer or b"").decode("utf-8", "replace")
    refused = not_own(said)
    if refused is not None:
        return refused
    if status == BUSY:
        return (
            f"another converge is running on this host (it holds {where}); try again when it ends"
        )
    if answer is None and status is None:
        return f"could not take the converge lock {where}: no answer within {TIMEOUT} s"
    return f"could not take the converge lock {where} (exit {status}, said {said[:40]!r}; flock?)"
