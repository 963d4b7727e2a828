"""A loopback SSH server that completes key exchange and refuses every login.

Enough to meet a real host key over a real connection: onboard's fetch, and the mismatch
paramiko and pyinfra raise against a recorded key, without a sandbox.
"""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def ssh_server(host_key: Path) -> Iterator[int]:
    """Serve on 127.0.0.1 with the private key at `host_key`; yields the port."""
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
                transport.start_server(server=_RefuseLogins())
            except (paramiko.SSHException, EOFError):
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
