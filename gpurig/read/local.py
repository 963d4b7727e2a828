"""This machine's state, read the way a node contract needs it: HostState's one command run by
`/bin/sh` in a subprocess, with no SSH stack, greenlets or pyinfra loaded (they cost a node
contract more than its whole read: issue 28). What pyinfra's @local connector did for this
read is done here, and more: the command runs in a session of its own from `/`, is killed as a
group past its time, and its output is bounded in bytes and in lines, so nothing a local
account starts from the read (a daemonised child holding the pipe) keeps it waiting."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from gpurig.facts.round_trip import HostState, Read
from gpurig.read import bounds

# After the shell has exited, how long what its children still write is waited for.
GRACE_SECONDS = 0.2


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """TERM, then KILL, the read's whole process group (sudo relays TERM to its command)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=1)
            return
        except subprocess.TimeoutExpired:
            continue


def run_bounded(argv: Sequence[str], timeout: float) -> bytes | None:
    """stdout of `argv` (stdin and stderr closed off, working directory `/`); None when it ran
    past `timeout` seconds (its group killed). OutputFlood past bounds.MAX_OUTPUT_BYTES (the rest is
    drained, so the command is not blocked)."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd="/",
        start_new_session=True,
    )
    assert proc.stdout is not None
    chunks: list[bytes] = []
    kept = 0
    deadline = time.monotonic() + timeout
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
    try:  # at EOF the shell may not be reaped yet; past the deadline it is stopped
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _stop(proc)
        return None
    if kept > bounds.MAX_OUTPUT_BYTES:
        raise bounds.OutputFlood(bounds.flood_reason(["stdout"]))
    return b"".join(chunks)


def lines(output: bytes) -> list[str]:
    """The output's lines as pyinfra hands them to a fact: split at newlines only, decoded with
    replacement. OutputFlood past bounds.MAX_OUTPUT_LINES, counted before any line is made."""
    if output.count(b"\n") > bounds.MAX_OUTPUT_LINES:
        raise bounds.OutputFlood(bounds.flood_reason(["stdout"]))
    found = output.decode("utf-8", "replace").split("\n")
    if found and found[-1] == "":
        found.pop()
    return found


def read_here(
    reads: list[Read], sudo: bool, timeout: float, bound: int | None = None
) -> dict[str, Any]:
    """HostState's values for `reads` on this machine ({} when the read ran out of time or
    printed nothing), through `sudo -n` when `sudo`; OutputFlood past the output bounds."""
    state = HostState()
    command = state.command(reads=reads, bound=bound)
    argv = [HostState.shell_executable or "/bin/sh", "-c", command]
    if sudo:
        argv = ["sudo", "-n", "-H", "--", *argv]
    output = run_bounded(argv, timeout)
    found = lines(output) if output else []
    return state.process(found) if found else state.default()
