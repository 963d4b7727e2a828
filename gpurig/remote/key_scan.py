"""A server's host key read during key exchange, without authenticating (onboarding records
it; paramiko, at the edge)."""

from __future__ import annotations

import socket

import paramiko


def host_key_line(key: paramiko.PKey) -> str:
    """`<type> <base64>`: a key as known_hosts and the inventory's `ssh.host_key` hold it."""
    return f"{key.get_name()} {key.get_base64()}"


def fetch_host_key(
    address: str,
    port: int,
    timeout: float,
    prefer: str | None = None,
    sock: socket.socket | paramiko.Channel | None = None,
) -> str:
    """The server's host key, read during key exchange without authenticating.

    `prefer` (a key type) asks for the type already recorded, so a server with several host
    keys is compared like for like. `sock`: a connection already open to it (a channel through
    its login node). Raises OSError, EOFError or paramiko.SSHException.
    """
    if sock is None:
        sock = socket.create_connection((address, port), timeout=timeout)
    transport = paramiko.Transport(sock)
    try:
        transport.banner_timeout = timeout
        options = transport.get_security_options()
        if prefer in options.key_types:
            options.key_types = [prefer, *(t for t in options.key_types if t != prefer)]
        transport.start_client(timeout=timeout)
        return host_key_line(transport.get_remote_server_key())
    finally:
        transport.close()
