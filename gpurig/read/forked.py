"""A node contract's read started by fork and exec from `os` alone, before anything else of the
contract loads (gpurig.node.ahead): `subprocess` loads `signal`, `locale`, `re` and `enum`, about
15 ms of a contract's start, which would then come before its read rather than beside it
(benchmarks/node_contracts.py). The child is started as `start` starts a read through
subprocess (a session of its own, from `/`, stdin and stderr on /dev/null, the signals Python
ignores back to their defaults, no descriptor but its three), and is collected and stopped by
gpurig.read.bounded's functions, which take a Forked as they take a Popen.

Only before anything has loaded `threading`: fork copies the calling thread alone, the child
runs Python code until its exec, and a library that patches threads (gevent) patches fork too
(`launch` starts through `start` otherwise). Both ways of starting a read live here, and
gpurig.read.bounded imports them, never the other way: loading this module loads `os` alone."""

from __future__ import annotations

import _signal
import os
import sys


def alone() -> bool:
    """Whether nothing has loaded `threading` yet (a contract's start): then no thread runs but
    this one and no library (gevent) has patched `os` or the thread primitives under it."""
    return "threading" not in sys.modules


TYPE_CHECKING = False  # typing is not loaded before a contract's read starts
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Sequence
    from typing import Union

    # A read started by `start`, or forked: collected and stopped alike (gpurig.read.bounded).
    Started = Union[subprocess.Popen[bytes], "Forked"]


def launch(argv: list[str], stderr: int | None = None) -> Started:
    """`argv` started as a read is (its stderr on /dev/null or on the descriptor `stderr`):
    forked from `os` where nothing has loaded threading (a contract's start), else through
    subprocess (`start`), which is safe anywhere; collected and stopped by bounded's functions
    either way."""
    if alone():
        return fork_exec(argv, stderr)
    return start(argv, stderr)


def start(argv: Sequence[str], stderr: int | None = None) -> subprocess.Popen[bytes]:
    """`argv` started in a session of its own from `/`, stdin closed off and stderr too (or
    on the descriptor `stderr`), its stdout a pipe for gpurig.read.bounded's `collect`."""
    import subprocess

    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if stderr is None else stderr,
        cwd="/",
        start_new_session=True,
    )


class Forked:
    """A started command, with as much of subprocess.Popen as bounded's collect and stop use
    (its pid, its stdout, poll)."""

    def __init__(self, pid: int, stdout_fd: int) -> None:
        self.pid = pid
        self.stdout = open(stdout_fd, "rb", buffering=0)  # noqa: SIM115 (closed by collect)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def fork_exec(argv: list[str], stderr: int | None = None) -> Forked:
    """`argv` started (found on PATH as Popen finds it), its stderr on /dev/null or on the
    descriptor `stderr`; OSError where it cannot be executed."""
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    null = os.open(os.devnull, os.O_RDWR)
    try:
        pid = os.fork()
    except OSError:
        for fd in (out_read, out_write, err_read, err_write, null):
            os.close(fd)
        raise
    if pid == 0:  # pragma: no cover (the child: exec, or report why not; it never returns)
        _exec(argv, null, out_write, err_write, null if stderr is None else stderr)
    for fd in (out_write, err_write, null):  # the child's ends
        os.close(fd)
    failed = b""
    while chunk := os.read(err_read, 16):  # end of file: the exec closed it
        failed += chunk
    os.close(err_read)
    if failed:
        os.close(out_read)
        os.waitpid(pid, 0)
        code = int(failed) if failed.isdigit() else 0
        raise OSError(code, os.strerror(code), argv[0])
    return Forked(pid, out_read)


def _exec(argv: list[str], null: int, out: int, err: int, stderr: int) -> None:  # pragma: no cover
    try:
        os.setsid()
        os.chdir("/")
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(stderr, 2)
        for name in ("SIGPIPE", "SIGXFSZ"):  # Python's ignored signals, as Popen restores them
            if hasattr(_signal, name):
                _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
        _close_from_3(but=err)
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(err, str(exc.errno or 0).encode())
    finally:
        os._exit(127)


def _close_from_3(but: int) -> None:
    """Every descriptor past stderr closed but `but` (which the exec closes itself), as Popen's
    close_fds does: the read inherits nothing of what started it."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except (OSError, ValueError):
        os.closerange(3, but)
        os.closerange(but + 1, os.sysconf("SC_OPEN_MAX"))
        return
    for fd in fds:
        if fd > 2 and fd != but:
            os.closerange(fd, fd + 1)  # one descriptor, any error ignored (the listing's own)
