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
from collections.abc import Callable, Sequence
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


def start(argv: Sequence[str]) -> subprocess.Popen[bytes]:
    """`argv` started in a session of its own from `/`, stdin and stderr closed off, its
    stdout a pipe for `collect`."""
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd="/",
        start_new_session=True,
    )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """A started command no longer wanted: its group stopped, its pipe closed."""
    _stop(proc)
    if proc.stdout is not None:
        proc.stdout.close()


def run_bounded(argv: Sequence[str], timeout: float) -> bytes | None:
    """stdout of `argv` (stdin and stderr closed off, working directory `/`); None when it ran
    past `timeout` seconds (its group killed). OutputFlood past bounds.MAX_OUTPUT_BYTES (the rest is
    drained, so the command is not blocked)."""
    return collect(start(argv), time.monotonic() + timeout)


def collect(proc: subprocess.Popen[bytes], deadline: float) -> bytes | None:
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


# What a read started ahead (gpurig.node.ahead) is asked with the command wanted: the started
# command and its deadline where it is that command, else None (then it is run now).
Ahead = Callable[[list[str]], "tuple[subprocess.Popen[bytes], float] | None"]


def read_argv(state: HostState, reads: list[Read], sudo: bool, bound: int | None) -> list[str]:
    """The command by which `state` reads `reads` on this machine (through `sudo -n`)."""
    argv = [HostState.shell_executable or "/bin/sh", "-c", state.command(reads, bound)]
    return ["sudo", "-n", "-H", "--", *argv] if sudo else argv


def read_here(
    reads: list[Read],
    sudo: bool,
    timeout: float,
    bound: int | None = None,
    ahead: Ahead | None = None,
) -> dict[str, Any]:
    """HostState's values for `reads` on this machine ({} when the read ran out of time or
    printed nothing), through `sudo -n` when `sudo`; OutputFlood past the output bounds.
    `ahead` may hand over the same command, started earlier."""
    state = HostState()
    argv = read_argv(state, reads, sudo, bound)
    started = ahead(argv) if ahead is not None else None
    proc, deadline = started or (start(argv), time.monotonic() + timeout)
    output = collect(proc, deadline)
    found = lines(output) if output else []
    return state.process(found) if found else state.default()
