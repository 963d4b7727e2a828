"""Parses kept between runs, trusted as Python trusts bytecode in __pycache__: in `marshal`'s
format (data only), named by what was parsed, used only where the reading account owns both
the file and its directory and no one else may write either. A node contract then skips
what a parse costs it at every job start; anything odd means parsing again. Paths are strings
and `os` does the work: a contract reads its copies before its read starts
(gpurig.node.ahead), where pathlib would cost more than the copy."""

from __future__ import annotations

import marshal
import os
import stat

TYPE_CHECKING = False  # typing is not loaded before a contract's read starts
if TYPE_CHECKING:
    from typing import Any

SUFFIX = f"marshal{marshal.version}"


def trusted(path: str | os.PathLike[str], owner: int, kind: int) -> bool:
    """Whether `path` is a `kind` (stat.S_IFREG, S_IFDIR) of `owner` that no one else may
    write, itself and not through a link."""
    try:
        found = os.lstat(path)
    except OSError:
        return False
    mode = found.st_mode
    return stat.S_IFMT(mode) == kind and found.st_uid == owner and not mode & 0o022


def read(directory: str | os.PathLike[str], name: str, owner: int) -> Any | None:
    """The value kept as `name` in `directory`, or None (none kept, or not to be trusted)."""
    copy = os.path.join(directory, f"{name}.{SUFFIX}")
    if not (trusted(directory, owner, stat.S_IFDIR) and trusted(copy, owner, stat.S_IFREG)):
        return None
    try:
        with open(copy, "rb") as f:
            return marshal.loads(f.read())
    except (OSError, EOFError, ValueError, TypeError):
        return None


def keep(
    directory: str | os.PathLike[str],
    name: str,
    value: Any,
    stale: str,
    mode: int = 0o755,
    others: int = 0,
) -> None:
    """Keep `value` as `name` (atomically: a run beside this one reads all of it or none),
    removing the copies whose names start with `stale` but this one and the `others` written
    last. Nothing is kept where it cannot be written, where read() would not trust it, or of a
    value marshal cannot hold as it is (a date)."""
    import contextlib  # writing: after a contract's read started (gpurig.node.ahead)

    from gpurig.fsutil import atomic_write

    with contextlib.suppress(OSError, ValueError):
        data = marshal.dumps(value)
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, mode)
        if not trusted(directory, os.geteuid(), stat.S_IFDIR):
            return  # read() would not trust a copy there: nothing is written either
        copy = f"{name}.{SUFFIX}"
        atomic_write(os.path.join(directory, copy), data, 0o644)
        olds = [
            os.path.join(directory, old)
            for old in os.listdir(directory)
            if old.startswith(stale) and old.endswith(f".{SUFFIX}") and old != copy
        ]
        olds.sort(key=lambda old: os.stat(old).st_mtime_ns, reverse=True)
        for old in olds[others:]:
            with contextlib.suppress(FileNotFoundError):  # another run's removal
                os.unlink(old)
