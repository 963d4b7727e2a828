"""TCP connections opened before pyinfra and the rest of the run load. A rental 100 ms away
answers the TCP handshake in one round trip; dialled once the inventory and its keys are
checked, that round trip passes while this process loads pyinfra and builds its state, and
paramiko takes the connected socket (pyinfra passes `sock` through
`ssh_paramiko_connect_kwargs`, as gpurig's login node hop does).

Only a connection pyinfra would open itself is dialled: a host without a login node, whose
address ~/.ssh/config (the file pyinfra reads) does not send elsewhere (another HostName or
Port, a ProxyCommand or ProxyJump). A file with an Include or a Match line is not followed
here: nothing is dialled early then. When pyinfra wants the connection, it waits for the
handshake (cooperatively: the other hosts go on) until the host's connect timeout, counted
from the dial; a handshake that failed (refused, unreachable) is closed unused and pyinfra
connects as it always does, with its own error; one that timed out is that try's timeout. A
retry never reuses a socket."""

from __future__ import annotations

import errno
import re
import select
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paramiko import SSHConfig

from gpurig.spec.inventory import Host

# A few hosts at most: past that the fleet's own parallelism hides a round trip, and sockets
# dialled long before pyinfra's pool reaches them would wait on sshd's LoginGraceTime.
MOST = 8
ROUTES = ("proxycommand", "proxyjump")
SSH_CONFIG = Path("~/.ssh/config")  # pyinfra's (gpurig names it no other)
_UNFOLLOWED = re.compile(r"^\s*(include|match)\b", re.IGNORECASE | re.MULTILINE)
# pyinfra's words for a connect that timed out (its "Could not connect" and paramiko's error).
TIMED_OUT = "Could not connect (timed out)"


@dataclass(frozen=True)
class Dialled:
    """A connection started, and when (time.monotonic())."""

    sock: socket.socket
    at: float


def user_config(path: Path) -> SSHConfig | None:
    """ssh_config(5) at `path` as paramiko reads it (empty where there is no such file); None
    where gpurig does not read it as pyinfra would (Include, Match, unreadable, unparsed)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return SSHConfig()
    except (OSError, UnicodeError):
        return None
    if _UNFOLLOWED.search(text):
        return None
    try:
        return SSHConfig.from_text(text)
    except Exception:  # paramiko's parser: pyinfra will say what is wrong
        return None


def dial(hosts: Sequence[Host], ssh_config: Path = SSH_CONFIG) -> dict[str, Dialled]:
    """A connection started (not awaited) to each of `hosts` that pyinfra would reach directly
    at its address and port, by name; none for a larger fleet. A name that resolves to more
    than one address (IPv6 and IPv4: paramiko falls back from one to the next), one that does
    not resolve and a connect refused at once are left to pyinfra."""
    if len(hosts) > MOST:
        return {}
    config = user_config(ssh_config.expanduser())
    if config is None:
        return {}
    started = {}
    for host in hosts:
        if host.ssh.jump or host.name.startswith("@"):  # a login node's hop, pyinfra's @local
            continue
        if rerouted(config.lookup(host.address), host.address, host.ssh.port):
            continue
        try:
            found = socket.getaddrinfo(host.address, host.ssh.port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            continue
        if len({info[4] for info in found}) != 1:  # paramiko tries each in turn: left to it
            continue
        family, kind, proto, _, address = found[0]
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        if sock.connect_ex(address) in (0, errno.EINPROGRESS):
            started[host.name] = Dialled(sock, time.monotonic())
        else:
            sock.close()
    return started


def rerouted(lookup: Mapping[str, Any], address: str, port: int) -> bool:
    """Whether ssh_config's entry for `address` (paramiko's lookup: it names the HostName even
    where none is set) makes pyinfra dial something else than (address, port)."""
    return (
        lookup.get("hostname", address) != address
        or int(lookup.get("port", port)) != port
        or any(route in lookup for route in ROUTES)
    )


def settled(dialled: Dialled, timeout: float) -> str | None:
    """Wait for the handshake `dialled` started, until `timeout` seconds after the dial: None
    once connected, TIMED_OUT, or why it failed."""
    left = max(0.0, dialled.at + timeout - time.monotonic())
    _, done, _ = select.select([], [dialled.sock], [], left)  # gevent's, once it has patched
    if not done:
        return TIMED_OUT
    error = dialled.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    return None if error == 0 else errno.errorcode.get(error, str(error))


@contextmanager
def handed(connector: Any, dialled: Dialled | None) -> Iterator[str | None]:
    """pyinfra's SSH `connector` with the dialled socket in its paramiko arguments for one
    connect, once its handshake is done; yields TIMED_OUT instead where it did not finish
    within the connector's connect timeout (then this try has timed out: not connecting
    again). Where the handshake failed, the socket is closed and the connector left as it was:
    pyinfra connects itself."""
    if dialled is None:
        yield None
        return
    data = connector.data
    before = data["ssh_paramiko_connect_kwargs"]
    timeout = (before or {}).get("timeout", connector.state.config.CONNECT_TIMEOUT)
    why = settled(dialled, timeout)
    if why is not None:
        dialled.sock.close()
        yield TIMED_OUT if why == TIMED_OUT else None
        return
    data["ssh_paramiko_connect_kwargs"] = {**(before or {}), "sock": dialled.sock}
    try:
        yield None
    finally:
        data["ssh_paramiko_connect_kwargs"] = before
