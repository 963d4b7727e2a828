"""This machine read and judged as a host of the inventory: the same one command, plans and
checks as drift over SSH, run here in a subprocess (gpurig.read.local) with no SSH stack."""

from __future__ import annotations

import os

from gpurig.checks.judge import EVERYTHING, PROBE_TIMEOUT, Probed, Scope, drift_reads, report
from gpurig.read.bounds import OutputFlood
from gpurig.read.local import StartedRead, read_here
from gpurig.spec.finding import HostReport
from gpurig.spec.inventory import Host
from gpurig.spec.user_scope import is_user


def local_sudo() -> bool:
    """Whether this machine is read through `sudo -n`, as a non-root SSH login is (host_data):
    for a user who is not root and may run sudo without a password. Nothing could answer a
    password prompt in a prolog or a CI job, so without that the user reads as itself."""
    if os.geteuid() == 0:
        return False
    import shutil
    import subprocess

    if shutil.which("sudo") is None:
        return False
    ask = ["sudo", "-n", "true"]
    try:
        done = subprocess.run(ask, stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def drift_local(
    host: Host,
    scope: Scope = EVERYTHING,
    timeout: int | None = None,
    ahead: StartedRead | None = None,
) -> HostReport:
    """Read and judge this machine as `host`: the same one command, plans and checks as
    `run_drift` (gpurig.remote.drift), run here in a subprocess (no SSH), reading what `scope`
    says within `timeout` seconds.

    As root (a SLURM prolog, a health check, node-problem-detector) nothing it starts is
    found through the caller's PATH or working directory, which another account may write:
    HostState is `/bin/sh`, which reads from `/` with the system's own PATH. `ahead` may hand
    over the read, started earlier (gpurig.node.ahead)."""
    return report(read_local(host, scope, timeout, ahead), scope)


def read_local(
    host: Host,
    scope: Scope = EVERYTHING,
    timeout: int | None = None,
    ahead: StartedRead | None = None,
) -> Probed:
    """This machine read as `host` (local_read: sh in a subprocess, no SSH stack), through
    sudo where passwordless (never with scope: user, which acts as the user). A read past
    `timeout` is {}: `state.unreadable`, said so; output past the bounds is refused."""
    spec = host.spec
    sudo = not is_user(spec) and local_sudo()
    reads = drift_reads(spec, scope)
    try:
        state = read_here(reads, sudo, timeout or PROBE_TIMEOUT, scope.bound, ahead)
    except OutputFlood as exc:
        return Probed(host, None, str(exc))
    return Probed(host, state)
