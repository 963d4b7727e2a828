"""Where an inventory's private key paths lead: the same inventory runs on a laptop and in CI,
so a key is best written under the user's home (`~/...`), and one missing here makes its host
unreachable here. Both are warnings of `validate`: the inventory is valid either way. So is a
key file here that cannot be a usable private key, as far as its bytes and mode say
(`key_file_problem`); the commands that connect load each key before any host is touched and
refuse one they cannot load (gpurig.remote.key_load: the parser is paramiko's, at the edge)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path

from gpurig.spec.inventory import Host
from gpurig.spec.pattern import lazy
from gpurig.spec.words import counted


def home_relative(path: str, home: str) -> str:
    """`path` as `~/...` where it lies under `home` (a shell expands `--key ~/.ssh/k` before
    gpurig sees it); any other path unchanged."""
    full = os.path.abspath(os.path.expanduser(path))
    inside = os.path.relpath(full, home)
    if inside == "." or inside.startswith(os.pardir + os.sep) or inside == os.pardir:
        return path
    return f"~/{inside}"


def repository(start: Path) -> Path:
    """The checkout holding `start` (the nearest directory with `.git`), else its directory."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return start


# What a key file holds, read at most this far (an OpenSSH RSA key of 16384 bits is ~13 KiB).
KEY_READ = 65536
# A public key's first word (OpenSSH's one-line form) or its other armours.
_PUBLIC = lazy(r"\s*(?:(?:ssh-|ecdsa-sha2-|sk-)\S+\s|-----BEGIN PUBLIC KEY|---- BEGIN SSH2 PUBLIC)")
_PRIVATE = lazy(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")


def key_file_problem(full: Path) -> str | None:
    """Why the file at `full` (one that exists) cannot serve as a private key here, as far as
    its bytes and mode say, or None: unreadable, empty, a public key, no private key armour,
    or readable by others (OpenSSH refuses a key whose mode gives the group or others any
    access, where it is the user's own: sshkey_perm_ok). Parsing is the edge's."""
    try:
        mode = full.stat()
        with full.open("rb") as file:
            data = file.read(KEY_READ).decode("latin-1")  # bytes as they are: armour is ASCII
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    if not data.strip():
        return "the file is empty"
    if _PUBLIC.match(data):
        return "it holds a public key, not the private key (that is the file without .pub)"
    if not _PRIVATE.search(data):
        return (
            "it is not a private key in a form gpurig reads (no '-----BEGIN ... PRIVATE "
            "KEY-----' line: OpenSSH's or PEM)"
        )
    if mode.st_uid == os.getuid() and mode.st_mode & 0o077:
        return (
            f"its mode {mode.st_mode & 0o777:04o} gives other accounts access, and OpenSSH "
            f"refuses such a key: chmod 600 {full}"
        )
    return None


def key_fields(host: Host) -> Iterator[tuple[str, str]]:
    """(field, path) of each private key `host` names: its own, and its login node's where
    that is another."""
    if host.ssh.key:
        yield "ssh.key", host.ssh.key
    jump = host.ssh.jump
    if jump and jump.key and jump.key != host.ssh.key:  # the host's own unless it names one
        yield "ssh.jump.key", jump.key


def _key_problems(key: str, root: Path) -> list[str]:
    """What is wrong with private key path `key` for an inventory in repository `root`."""
    full = Path(os.path.expanduser(key))
    problems = []
    if key.startswith("/") and not full.resolve().is_relative_to(root):
        problems.append(
            f"{key} is an absolute path outside this repository, so another machine "
            "(a CI runner) looks for it there: write it under the home as ~/... (each "
            "machine's own)"
        )
    if not full.is_file():
        problems.append(
            f"no private key file at {full} on this machine: drift reports the host "
            "unreachable and the converge cannot log in from here"
        )
    elif why := key_file_problem(full):
        problems.append(
            f"the private key {full} cannot be loaded here: {why}; drift, accept, onboard and "
            "the converge refuse to start from here"
        )
    return problems


def key_warnings(hosts: Sequence[Host]) -> list[str]:
    """One line per key path that is absolute outside the inventory's repository (found on
    this machine only), and per key file missing here; a key many hosts share (the defaults')
    is said once, at its first host, with how many others use it. Each file's repository and
    each key are looked at once (a fleet of thousands shares a few)."""
    root_of = cache(lambda source: repository(Path(source).resolve().parent))
    problems = cache(_key_problems)
    found: dict[tuple[str, str], list[str]] = {}
    for host in hosts:
        where = f"{host.source}:{host.line}: hosts.{host.name}"
        for field, key in key_fields(host):
            for said in problems(key, root_of(host.source)):
                found.setdefault((field, said), []).append(where)
    return [
        f"{wheres[0]}.{field}: {said}"
        + (f" (and {counted(len(wheres) - 1, 'other host')})" if len(wheres) > 1 else "")
        for (field, said), wheres in found.items()
    ]
