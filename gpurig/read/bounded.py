"""A command run on this machine the way a read must be: in a session of its own from `/`,
stdin and stderr closed off, killed as a group past its time, its output bounded in bytes, so
nothing a local account starts from it (a daemonised child holding the pipe) keeps gpurig
waiting. Started (gpurig.read.forked: `start`, `launch`) and collected here apart, so that a
node contract can start its read first; a read forked ahead is collected without loading
subprocess at all."""

from __future__ import annotations

import os
import selectors
import signal
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpurig.read import bounds
from gpurig.read.forked import start

if TYPE_CHECKING:
    from gpurig.read.forked import Started

# After the shell has exited, how long what its children still write is waited for.
GRACE_SECONDS = 0.2


def _exited(proc: Started, deadline: float) -> bool:
    """Whether `proc` exits by the `deadline` (time.monotonic), polled as Popen.wait polls with
    a timeout: from half a millisecond up to 50."""
    delay = 0.0005
    while proc.poll() is None:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.05)
    return True


def _stop(proc: Started) -> None:
    """TERM, then KILL, the read's whole process group (sudo relays TERM to its command)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        if _exited(proc, time.monotonic() + 1):
            return


def stop(proc: Started) -> None:
    """A started command no longer wanted: its group stopped, its pipe closed."""
    _stop(proc)
    if proc.stdout is not None:
        proc.stdout.close()


def run_bounded(argv: Sequence[str], timeout: float) -> bytes | None:
    """stdout of `argv` (stdin and stderr closed off, working directory `/`); None when it ran
    past `timeout` seconds (its group killed). OutputFlood past bounds.MAX_OUTPUT_BYTES (the rest is
    drained, so the command is not blocked)."""
    return collect(start(argv), time.monotonic() + timeout)


def collect(proc: Started, deadline: float) -> bytes | None:
    """run_bounded's reading of a started command, until the `deadline` (time.monotonic)."""
    assert proc.stdout is not None
    chunks: list[bytes] = []
    kept = 0
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if now >= deadline or (exited_at is not None and now - exited_at > GRACE_SECONDS):
                break
            if not selector.select(min(0.05, deadline - now)):
                continue
            data = os.read(proc.stdout.fileno(), 1 << 16)
            if not data:
                break
            kept += len(data)
            if kept <= bounds.MAX_OUTPUT_BYTES:
                chunks.append(data)
    proc.stdout.close()
    if not _exited(proc, deadline):  # at EOF the shell may not be reaped yet; past the deadline
        _stop(proc)  # it is stopped
        return None
    if kept > bounds.MAX_OUTPUT_BYTES:
        raise bounds.OutputFlood(bounds.flood_reason(["stdout"]))
    return b"".join(chunks)
