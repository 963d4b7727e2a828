"""Parses kept between runs, trusted as Python trusts bytecode in __pycache__: in `marshal`'s
format (data only), named by what was parsed, used only where the reading account owns both
the file and its directory and no one else may write either. A node contract then skips
what a parse costs it at every job start; anything odd means parsing again."""

from __future__ import annotations

import contextlib
import marshal
import os
import stat
from pathlib import Path
from typing import Any

from gpurig.fsutil import atomic_write

SUFFIX = f"marshal{marshal.version}"


def trusted(path: Path, owner: int, kind: int) -> bool:
    """Whether `path` is a `kind` (stat.S_IFREG, S_IFDIR) of `owner` that no one else may
    write, itself and not through a link."""
    try:
        found = path.lstat()
    except OSError:
        return False
    mode = found.st_mode
    return stat.S_IFMT(mode) == kind and found.st_uid == owner and not mode & 0o022


def read(directory: Path, name: str, owner: int) -> Any | None:
    """The value kept as `name` in `directory`, or None (none kept, or not to be trusted)."""
    copy = directory / f"{name}.{SUFFIX}"
    if not (trusted(directory, owner, stat.S_IFDIR) and trusted(copy, owner, stat.S_IFREG)):
        return None
    try:
        return marshal.loads(copy.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None


def keep(
    directory: Path, name: str, value: Any, stale: str, mode: int = 0o755, others: int = 0
) -> None:
    """Keep `value` as `name` (atomically: a run beside this one reads all of it or none),
    removing the copies `stale` (a glob) names but this one and the `others` written last.
    Nothing is kept where it cannot be written, where read() would not trust it, or of a value
    marshal cannot hold as it is (a date)."""
    with contextlib.suppress(OSError, ValueError):
        data = marshal.dumps(value)
        directory.mkdir(mode=mode, parents=False, exist_ok=True)
        if not trusted(directory, os.geteuid(), stat.S_IFDIR):
            return  # read() would not trust a copy there: nothing is written either
        copy = directory / f"{name}.{SUFFIX}"
        atomic_write(copy, data, 0o644)
        olds = [old for old in directory.glob(f"{stale}.{SUFFIX}") if old != copy]
        olds.sort(key=lambda old: old.stat().st_mtime_ns, reverse=True)
        for old in olds[others:]:
            old.unlink(missing_ok=True)
