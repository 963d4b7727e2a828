"""The schema's verdict on a node's spec file, remembered by content. The node contracts load
`/etc/gpurig/node.yaml` at every job start; loading jsonschema to validate the same text
against the same schema cost more than the node's whole read (issue 28). A text that passed
is remembered as an empty file named by the hash of gpurig's version, the schema and the
text, in a directory only this account (as root: root alone) can change: root's in
`/var/cache/gpurig`, a user's in their own cache. Any change to the text, the schema or
gpurig validates again; a place others could write is not trusted and nothing is skipped."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from gpurig import __version__

ROOT_CACHE = Path("/var/cache/gpurig")


def cache_dir() -> Path:
    """Where this account's verdicts live."""
    if os.geteuid() == 0:
        return ROOT_CACHE / "valid-specs"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "gpurig", "valid-specs")


def _key(schema: bytes, text: str) -> str:
    digest = hashlib.sha256()
    for part in (__version__.encode(), hashlib.sha256(schema).digest(), text.encode()):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def _trusted(directory: Path) -> bool:
    """The directory and every one above it: no link, owned by root or this account, and
    writable by neither a group nor others."""
    me = os.geteuid()
    for place in (directory, *directory.parents):
        info = os.lstat(place)
        if stat.S_ISLNK(info.st_mode) or info.st_uid not in (0, me) or info.st_mode & 0o022:
            return False
    return True


def validated_before(schema: bytes, text: str) -> bool:
    """Whether this exact text passed this exact schema here before."""
    directory = cache_dir()
    try:
        return _trusted(directory) and (directory / _key(schema, text)).is_file()
    except OSError:
        return False


def remember_valid(schema: bytes, text: str) -> None:
    """Remember that `text` passed; where that cannot be done safely, nothing is remembered
    and the next run validates again."""
    directory = cache_dir()
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _trusted(directory):
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW
        os.close(os.open(directory / _key(schema, text), flags, 0o600))
    except OSError:
        return
