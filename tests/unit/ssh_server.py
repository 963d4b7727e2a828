"""Loopback SSH servers: one that completes key exchange and refuses every login, and a login
node that lets one client key in and forwards `direct-tcpip` channels to names only it knows.

Enough to meet a real host key over a real connection: onboard's fetch, and the mismatch
paramiko and pyinfra raise against a recorded key, directly or through a login node, without
a sandbox.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import paramiko


def generate_key(path: Path) -> Path:
    """An ed25519 key pair made by ssh-keygen (PATH.pub holds the public half)."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", str(path)],
        check=True,
    )
    return path


class _RefuseLogins(paramiko.ServerInterface):
    def get_allowed_auths(self, username: str) -> str:
        return "publickey"


Route = tuple[str, int]


@dataclass
class LoginNodeLog:
    """What a login node saw: successful logins, and every connection (closed ones too)."""

    logins: int = 0
    transports: list[paramiko.Transport] = field(default_factory=list)

    def open(self, settle: float = 5.0) -> int:
        """Connections still open once those the client closed are seen closed here."""
        deadline = time.monotonic() + settle
        while (
            count := sum(t.is_active() for t in self.transports)
        ) and time.monotonic() < deadline:
            time.sleep(0.02)
        return count


class _LoginNode(paramiko.ServerInterface):
    """Lets in the one client key; opens forwarding channels to the routes it knows."""

    def __init__(
        self, client_key: paramiko.PKey, routes: dict[Route, Route], seen: LoginNodeLog
    ) -> None:
        self.client_key, self.routes, self.seen = client_key, routes, seen
        self.destinations: dict[int, Route] = {}  # channel id -> where it goes

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        if key.get_base64() != self.client_key.get_base64():
            return paramiko.AUTH_FAILED
        self.seen.logins += 1
        return paramiko.AUTH_SUCCESSFUL

    def check_channel_direct_tcpip_request(self, chanid: int, origin: Route, dest: Route) -> int:
        if tuple(dest) not in self.routes:
            return paramiko.OPEN_FAILED_CONNECT_FAILED
        self.destinations[chanid] = self.routes[tuple(dest)]
        return paramiko.OPEN_SUCCEEDED


def _pump(source: socket.socket | paramiko.Channel, sink: socket.socket | paramiko.Channel) -> None:
    with suppress(OSError, EOFError):  # either end may go first, and its transport with it
        while data := source.recv(65536):
            sink.sendall(data)
    for end in (sink, source):
        with suppress(OSError, EOFError):
            end.close()


def _forward(transport: paramiko.Transport, login: _LoginNode) -> None:
    """Connect each channel the client opens to its destination and copy both ways."""
    while transport.is_active():
        channel = transport.accept(timeout=0.1)
        if channel is None:
            continue
        try:
            upstream = socket.create_connection(login.destinations.pop(channel.get_id()), 5)
        except OSError:
            channel.close()
            continue
        for pair in ((channel, upstream), (upstream, channel)):
            threading.Thread(target=_pump, args=pair, daemon=True).start()


@contextmanager
def login_node(
    host_key: Path, client_key: Path, routes: dict[Route, Route]
) -> Iterator[tuple[int, LoginNodeLog]]:
    """A login node on 127.0.0.1 (host key at `host_key`) that lets `client_key` in and
    forwards channels for each (name, port) in `routes` to its real (address, port);
    yields its port and what it saw."""
    client = paramiko.Ed25519Key.from_private_key_file(str(client_key))
    seen = LoginNodeLog()

    def start(transport: paramiko.Transport) -> None:
        login = _LoginNode(client, routes, seen)
        seen.transports.append(transport)
        transport.start_server(server=login)
        threading.Thread(target=_forward, args=(transport, login), daemon=True).start()

    with _serve(host_key, start) as port:
        yield port, seen


@contextmanager
def ssh_server(host_key: Path) -> Iterator[int]:
    """Serve on 127.0.0.1 with the private key at `host_key`; yields the port."""
    with _serve(host_key, lambda t: t.start_server(server=_RefuseLogins())) as port:
        yield port


@contextmanager
def _serve(host_key: Path, start: Callable[[paramiko.Transport], None]) -> Iterator[int]:
    """Accept on 127.0.0.1 and hand each connection's transport to `start`; yields the port."""
    key = paramiko.Ed25519Key.from_private_key_file(str(host_key))
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()
    transports: list[paramiko.Transport] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            transport = paramiko.Transport(conn)
            transport.add_server_key(key)
            transports.append(transport)
            try:
                start(transport)
            except (paramiko.SSHException, EOFError, OSError):  # a client that hung up early
                transport.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for transport in transports:
            transport.close()
        listener.close()
