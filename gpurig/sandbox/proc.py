"""Processes and commands, identified by pid *and* start time so a reused pid is never killed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


class SandboxError(RuntimeError):
    """A sandbox step failed; the message says which and what the command printed."""


def run(
    argv: Sequence[str],
    *,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command, raising SandboxError with its stderr when `check` and it fails."""
    full_env = {**os.environ, **env} if env else None
    proc = subprocess.run(
        list(argv), capture_output=True, text=True, env=full_env, input=input, check=False
    )
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise SandboxError(f"`{' '.join(argv)}` failed ({proc.returncode}): {detail}")
    return proc


def start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name may contain spaces and parentheses: fields start after the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):  # dead, waiting for a parent that may never reap it
        return None
    return int(fields[19])


def alive(pid: int | None, started: int | None) -> bool:
    """True when the recorded process is still the one we started."""
    return pid is not None and started is not None and start_time(pid) == started


def kill(pid: int | None, started: int | None, timeout: float = 5.0) -> bool:
    """SIGKILL the recorded process if it is still ours; True when something was killed."""
    if not alive(pid, started):
        return False
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while alive(pid, started) and time.monotonic() < deadline:
        time.sleep(0.02)
    return True


def children(pid: int, timeout: float = 5.0) -> list[int]:
    """Direct children of `pid`, waiting until at least one exists (a fork may still be due)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                found = [int(p) for p in f.read().split()]
        except OSError:
            found = []
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.01)


def wait_port(address: str, port: int, timeout: float) -> bool:
    """Wait until something accepts TCP connections at address:port."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=0.5) as sock:
                banner = sock.recv(64) if port == 22 else b"x"
            if banner:
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def wait_port_in(netns: str, address: str, port: int, timeout: float) -> bool:
    """wait_port as seen from inside network namespace `netns` (a host only the login node
    reaches): this interpreter, run there by `ip netns exec`."""
    code = (
        "import sys; from gpurig.sandbox.proc import wait_port; "
        "sys.exit(not wait_port(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))"
    )
    argv = ["ip", "netns", "exec", netns, sys.executable, "-c", code, address, str(port)]
    return run([*argv, str(timeout)], check=False).returncode == 0


def spawn_daemon(argv: Sequence[str], log: Path, address: str, port: int) -> tuple[int, int | None]:
    """Start a long-running server in its own session; wait until it accepts connections.
    Returns its pid and start time for the sandbox's records."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
        )
    if not wait_port(address, port, timeout=15) or proc.poll() is not None:
        proc.kill()
        # Dead with the port answering means another process holds it (an earlier run's).
        raise SandboxError(f"`{argv[0]}` is not serving {address}:{port}; see {log}")
    return proc.pid, start_time(proc.pid)
