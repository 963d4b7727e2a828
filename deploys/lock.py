"""One converge at a time per host. The lock is a `flock` on the host held by a command on
its own SSH channel for as long as this converge is connected: when the run ends, or the
machine running it dies or loses the network, sshd ends the session and the lock goes with it,
so a killed converge never leaves a stale lock behind.

The host's answer is untrusted and may never come: it is read as bytes, at most one short
line, within a timeout; whatever goes wrong refuses this host alone (an exception here would
stop pyinfra's whole run)."""

from __future__ import annotations

from paramiko.ssh_exception import SSHException
from pyinfra import host
from pyinfra.connectors.util import SUDO_PASSWORD_REQUIRED_LINES

from gpurig.checks.node import sudo_refused_message
from gpurig.node.lock import BUSY, LOCK, hold_command, not_own

TIMEOUT = 30  # seconds for the host to answer
HELD = b"held"
# By host name: the channels must outlive the deploy file's run, until pyinfra disconnects.
_HELD: dict[str, object] = {}


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
