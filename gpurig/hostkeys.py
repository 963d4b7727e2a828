"""Host keys: fetch one before trusting it, show it as OpenSSH does, recognise a changed one.

Every connection checks the recorded key strictly; when it does not match, paramiko raises
`BadHostKeyException` and pyinfra turns that into `ConnectError("SSH host key error (...)")`
(printed as `[name] SSH host key error ...` by its CLI). Converge, drift and onboard all
recognise those here and say the same thing: what it may mean and what to do.
"""

from __future__ import annotations

import base64
import hashlib
import re
import socket

import paramiko

# What paramiko (BadHostKeyException) and pyinfra (its ConnectError, its CLI log) say.
_MISMATCH = re.compile(r"SSH host key error|Host key for (server )?\S+ does not match")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CLI_LINE = re.compile(r"^[ \t]*\[(?P<name>[^\]\s]+)\]\s+SSH host key error", re.MULTILINE)


def host_key_line(key: paramiko.PKey) -> str:
    """`<type> <base64>`: a key as known_hosts and the inventory's `ssh.host_key` hold it."""
    return f"{key.get_name()} {key.get_base64()}"


def fingerprint(host_key: str) -> str:
    """`SHA256:...` as `ssh-keygen -lf` and ssh's first-connection prompt print it."""
    blob = base64.b64decode(host_key.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def fetch_host_key(address: str, port: int, timeout: float, prefer: str | None = None) -> str:
    """The server's host key, read during key exchange without authenticating.

    `prefer` (a key type) asks for the type already recorded, so a server with several host
    keys is compared like for like. Raises OSError, EOFError or paramiko.SSHException.
    """
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


def is_mismatch(error: BaseException | str) -> bool:
    """Whether a connection failed because the host key differs from the recorded one."""
    if isinstance(error, paramiko.BadHostKeyException):
        return True
    return bool(_MISMATCH.search(_ANSI.sub("", str(error))))


def mismatched_hosts(log: str) -> list[str]:
    """Names of the hosts pyinfra's CLI refused for a changed host key, from its stderr."""
    return list(dict.fromkeys(_CLI_LINE.findall(_ANSI.sub("", log))))


def changed_message(name: str, inventory: str) -> str:
    """What to tell a person whose host's key changed: never a hint to just accept it."""
    return (
        f"{name}: host key does not match the one recorded in {inventory} (a re-rented "
        "address, or worse): check with the provider; if the machine was re-created, remove "
        "its host_key and run `gpurig onboard` again"
    )
