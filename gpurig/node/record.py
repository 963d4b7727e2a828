"""Small state records a node contract keeps between runs, root-only where root runs it: a
directory and a file no other account may write (itself, not through a link), read back at
most a bounded number of bytes, and replaced atomically under a lock, so two contracts (a
Prolog beside a health check) or `gpurig ack` beside a contract never lose each other's
update. What is read is the caller's to parse strictly; anything odd reads as no record.
Paths as `os` takes them (a string, or a Path a caller has): no pathlib for a contract."""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterator

# How long a contract waits for another run's update before it goes on without its own.
LOCK_SECONDS = 2.0


def _trusted(info: os.stat_result, kind: int) -> bool:
    """Root's (or the running account's) alone: no other account wrote it."""
    owner = info.st_uid in (0, os.geteuid())
    return stat.S_IFMT(info.st_mode) == kind and owner and not info.st_mode & 0o022


def read(directory: str | os.PathLike[str], name: str, limit: int) -> str | None:
    """The record's text (at most `limit` bytes), where root (or this account) alone could
    have written it and its directory; None otherwise."""
    try:
        if not _trusted(os.lstat(directory), stat.S_IFDIR):
            return None
        fd = os.open(os.path.join(directory, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not _trusted(os.fstat(fd), stat.S_IFREG):
            return None
        return os.read(fd, limit + 1)[:limit].decode()
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def _private(directory: str | os.PathLike[str]) -> None:
    os.makedirs(directory, mode=0o700, exist_ok=True)
    if not _trusted(os.lstat(directory), stat.S_IFDIR):
        raise PermissionError(f"{directory}: not a directory only root may write")


def write(directory: str | os.PathLike[str], name: str, text: str) -> str:
    """Replace the record atomically, root-only (directory 0700, file 0600); OSError where the
    directory is not root's alone."""
    from gpurig.fsutil import atomic_write

    _private(directory)
    path = os.path.join(directory, name)
    atomic_write(path, text, 0o600)
    return path


@contextlib.contextmanager
def locked(
    directory: str | os.PathLike[str], name: str, wait: float = LOCK_SECONDS
) -> Iterator[None]:
    """Hold `name`.lock in `directory` while a record is read and replaced; OSError where the
    directory is not root's alone, or another run holds the lock past `wait` seconds."""
    import fcntl

    _private(directory)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    fd = os.open(os.path.join(directory, f"{name}.lock"), flags, 0o600)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise OSError(f"{directory}/{name}: another run holds its lock") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)
