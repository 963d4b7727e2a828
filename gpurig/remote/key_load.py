"""The private keys an inventory names, loaded here before any host is touched: a key gpurig
cannot load is the inventory's error on this machine (exit 2, with the key's path and what is
wrong), not a host that did not answer. pyinfra's SSH connector loads the key that ssh.key
names itself (RSA, ECDSA, then Ed25519, paramiko's classes: pyinfra.connectors.ssh_util) and,
with a key named, asks no ssh-agent; gpurig's login node hop hands the path to paramiko the
same way. What the key's bytes and mode say first (gpurig.spec.key_paths, shared with
`validate`'s warnings), then paramiko's own load. A key file missing here is left to
`validate`'s warning and to drift (the host unreachable from here), as before."""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from paramiko import ECDSAKey, Ed25519Key, PasswordRequiredException, RSAKey

from gpurig.spec.inventory import Host
from gpurig.spec.key_paths import key_fields, key_file_problem
from gpurig.spec.words import counted

# pyinfra's order (pyinfra.connectors.ssh_util._load_private_key_file).
KEY_TYPES = (RSAKey, ECDSAKey, Ed25519Key)
ENCRYPTED = (
    "it is encrypted, and gpurig has no passphrase for it: pyinfra loads the key ssh.key names "
    "itself and never asks an ssh-agent for it (name an unencrypted key, or leave ssh.key out "
    "to log in with the agent's keys)"
)
UNPARSED = "paramiko reads no RSA, ECDSA or Ed25519 private key in it"
NOTHING_CONTACTED = "no host was contacted: fix the key file, or name another in ssh.key"


class KeyRefused(Exception):
    """Private keys that cannot be loaded here: str() says each, and that no host was
    contacted (the command exits 2)."""


def load_problem(key: str, passphrase_asked: bool = False) -> str | None:
    """Why the private key file `key` (`~` expanded) cannot be loaded here, or None: it loads,
    or it is missing (not this check's). `passphrase_asked`: pyinfra's own command line asks
    for an encrypted key's passphrase on a terminal (the converge), so encryption is no
    refusal there."""
    full = Path(os.path.expanduser(key))
    if not full.is_file():
        return None
    problem = key_file_problem(full)
    if problem is not None:
        return problem
    for key_type in KEY_TYPES:
        try:
            key_type.from_private_key_file(str(full))
            return None
        except PasswordRequiredException:
            return None if passphrase_asked else ENCRYPTED
        except Exception:  # paramiko's SSHException, or what its parser raises on odd bytes
            continue
    return UNPARSED


def unloadable(hosts: Sequence[Host], passphrase_asked: bool = False) -> list[str]:
    """One line per private key of `hosts` that cannot be loaded here: where the inventory
    names it, its path and why; a key many hosts share is said once, at its first host, with
    how many others use it. Each key is loaded once."""
    problem = cache(load_problem)
    found: dict[tuple[str, str, str], list[str]] = {}
    for host in hosts:
        for field, key in key_fields(host):
            # The login node's hop is paramiko's own, which asks for no passphrase.
            why = problem(key, passphrase_asked and field == "ssh.key")
            if why is not None:
                where = f"{host.source}:{host.line}: hosts.{host.name}"
                found.setdefault((field, key, why), []).append(where)
    return [
        f"{wheres[0]}.{field}: cannot load the private key {os.path.expanduser(key)}: {why}"
        + (f" (and {counted(len(wheres) - 1, 'other host')})" if len(wheres) > 1 else "")
        for (field, key, why), wheres in found.items()
    ]


def refuse_unloadable(hosts: Sequence[Host], passphrase_asked: bool = False) -> None:
    """Raise KeyRefused where a private key `hosts` name cannot be loaded here: called by each
    command that connects, before any host is touched."""
    problems = unloadable(hosts, passphrase_asked)
    if problems:
        raise KeyRefused("\n".join([*problems, NOTHING_CONTACTED]))
