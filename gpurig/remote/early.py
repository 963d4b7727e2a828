"""TCP connections opened before pyinfra and the rest of the run load. A rental 100 ms away
answers the TCP handshake in one round trip; dialled once the inventory and its keys are
checked, that round trip passes while this process loads pyinfra and builds its state, and
paramiko takes the connected socket (pyinfra passes `sock` through
`ssh_paramiko_connect_kwargs`, as gpurig's login node hop does).

A socket is handed over only where it is the connection pyinfra would open: a host without a
login node, connected by then, whose address no ssh_config(5) entry sends elsewhere (another
HostName or Port, a ProxyCommand or ProxyJump: pyinfra's own reading of that file, looked up
when the socket is handed over). Any other socket is closed unused and pyinfra connects as it
always does, with its own errors, timeout and retries; a retry never reuses a socket."""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from gpurig.spec.inventory import Host

# A few hosts at most: past that the fleet's own parallelism hides a round trip, and sockets
# dialled long before pyinfra's pool reaches them would wait on sshd's LoginGraceTime.
MOST = 8
ROUTES = ("proxycommand", "proxyjump")


def dial(hosts: Sequence[Host]) -> dict[str, socket.socket]:
    """A connection started (not awaited) to each of `hosts` reached directly, by name; none
    for a larger fleet. An address that does not resolve or a connect refused at once is left
    to pyinfra, which says so in its own words."""
    if len(hosts) > MOST:
        return {}
    started = {}
    for host in hosts:
        if host.ssh.jump or host.name.startswith("@"):  # a login node's hop, pyinfra's @local
            continue
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                host.address, host.ssh.port, type=socket.SOCK_STREAM
            )[0]
        except (OSError, UnicodeError):
            continue
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        if sock.connect_ex(address) in (0, errno.EINPROGRESS):
            started[host.name] = sock
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


def connected(sock: socket.socket) -> bool:
    """Whether the handshake `sock` started has completed (not still under way, not failed)."""
    try:
        sock.getpeername()
    except OSError:
        return False
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0


@contextmanager
def handed(connector: Any, sock: socket.socket | None) -> Iterator[None]:
    """pyinfra's SSH `connector` with `sock` in its paramiko arguments for one connect, where
    it is the connection pyinfra would open; else `sock` closed and the connector as it was."""
    if sock is None:
        yield
        return
    from pyinfra.connectors.sshuserclient.client import get_ssh_config

    data = connector.data
    address, port = data["ssh_hostname"], int(data["ssh_port"] or 22)
    config = get_ssh_config(data["ssh_config_file"])
    if not connected(sock) or (config and rerouted(config.lookup(address), address, port)):
        sock.close()
        yield
        return
    before = data["ssh_paramiko_connect_kwargs"]
    data["ssh_paramiko_connect_kwargs"] = {**(before or {}), "sock": sock}
    try:
        yield
    finally:
        data["ssh_paramiko_connect_kwargs"] = before
