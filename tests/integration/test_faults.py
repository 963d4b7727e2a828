"""Faults on real sandbox hosts: a host killed in the middle of an operation while nine others
converge (they finish, the run names it, a re-run completes), and the converge itself killed
in the middle of a write and run again (no half-written file). A stand-in `install` (or
sftp-server) on the victim holds it inside the secret's operation until the test acts, so the
timing is exact."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support import FULL, REPO_ROOT, Sandbox, remote, write_inventory

from gpurig.remote.converge import ConvergeResult, converge
from gpurig.sandbox.proc import kill

HOSTS = [f"fleet-{i:03d}" for i in range(1, 11)]
VICTIM = "fleet-010"
MARKER = "/tmp/gpurig-fault-held"
SECRET = "/root/.gpurig-fault"
LIMITS = "/etc/security/limits.d/90-gpurig-core.conf"
# On PATH before /usr/bin for sshd's sessions: marks that the operation has begun, then waits.
HOLD = f"#!/bin/sh\ntouch {MARKER}\nexec sleep 600\n"

pytestmark = pytest.mark.disruptive


SFTP = "/usr/lib/openssh/sftp-server"


def hold_inside_the_secret_operation(sandbox: Sandbox, upload: bool = False) -> None:
    """Hold the victim at the secret's first command, or (`upload`) inside its file upload,
    where a dying host makes paramiko raise EOFError."""
    assert sandbox.up(fleet=len(HOSTS), full=FULL).returncode == 0  # every host up
    shell = remote(sandbox, VICTIM)
    shell.check_output(f"rm -f {MARKER} {SECRET} {SECRET}.gpurig-tmp")
    target = SFTP if upload else "/usr/local/bin/install"
    if upload:
        shell.check_output(f"mv {SFTP} {SFTP}.real")
    shell.check_output(f"printf %s '{HOLD}' > {target} && chmod 755 {target}")


def release(sandbox: Sandbox) -> None:
    remote(sandbox, VICTIM).check_output(
        f"rm -f /usr/local/bin/install {MARKER}; "
        f"if [ -e {SFTP}.real ]; then mv -f {SFTP}.real {SFTP}; fi"
    )


def wait_for_marker(sandbox: Sandbox) -> None:
    """The victim is inside the operation: its `install` stand-in has run."""
    record = sandbox.state.hosts[VICTIM]
    marker = Path(f"/proc/{record.pid}/root{MARKER}")
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert time.monotonic() < deadline, "the victim never reached the secret's operation"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def inventory(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert sandbox.up(fleet=len(HOSTS), full=FULL).returncode == 0
    secret = tmp_path_factory.mktemp("fault") / "token"
    secret.write_text("fault-token-0123456789\n" * 64)
    specs = {name: {"core_dumps": "disabled"} for name in HOSTS}
    specs[VICTIM] = {"core_dumps": "disabled", "secrets": [{"src": str(secret), "dest": SECRET}]}
    return write_inventory(sandbox, tmp_path_factory.mktemp("fault") / "inv.yaml", specs)


def test_a_host_killed_mid_operation_fails_alone(sandbox: Sandbox, inventory: Path, faults_seen):
    hold_inside_the_secret_operation(sandbox, upload=True)
    result: list[ConvergeResult] = []
    run = threading.Thread(target=lambda: result.append(converge([inventory], limit=HOSTS)))
    run.start()
    wait_for_marker(sandbox)
    record = sandbox.state.hosts[VICTIM]
    assert kill(record.pid, record.started)  # the host's whole namespace, sshd and all
    faults_seen.append("host killed mid-operation")
    run.join(timeout=300)
    [first] = result
    assert first.returncode != 0
    victim_lines = "\n".join(line for line in first.stderr.splitlines() if VICTIM in line)
    assert "connection lost" in victim_lines, victim_lines
    assert "internal exception" not in first.stderr
    assert first.failed_hosts == [VICTIM], first.failed_hosts
    # The nine others ran every operation: their core dump files are there.
    for name in HOSTS[:-1]:
        assert remote(sandbox, name).file(LIMITS).exists, name

    assert sandbox.up(fleet=len(HOSTS), full=FULL).returncode == 0  # the host is back
    release(sandbox)
    again = converge([inventory], limit=HOSTS)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.changed.get(f"Secrets | Secret {SECRET}") == [VICTIM]
    assert remote(sandbox, VICTIM).file(SECRET).mode == 0o600


def test_the_converge_killed_mid_write_leaves_no_half_written_file(
    sandbox: Sandbox, inventory: Path, faults_seen
):
    shell = remote(sandbox, VICTIM)
    shell.check_output(f"rm -f {SECRET}")
    hold_inside_the_secret_operation(sandbox)
    env = {**os.environ, "GPURIG_INVENTORY": str(inventory)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pyinfra", "-y", "--limit", VICTIM, "inventory.py",
         "deploys/gpu_host.py"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_for_marker(sandbox)
    proc.send_signal(signal.SIGKILL)  # the converge dies between creating and filling a file
    proc.wait(timeout=30)
    faults_seen.append("converge killed mid-write")
    assert not shell.file(SECRET).exists  # never a half-written secret in place
    release(sandbox)
    shell.check_output("pkill -f '[s]leep 600' || true")
    again = converge([inventory], limit=[VICTIM])
    assert again.returncode == 0, again.stderr[-3000:]
    assert shell.file(SECRET).size == 23 * 64 and shell.file(SECRET).mode == 0o600
    assert not shell.file(f"{SECRET}.gpurig-tmp").exists


@pytest.fixture(scope="module")
def faults_seen(sandbox: Sandbox) -> list[str]:
    seen: list[str] = []
    yield seen
    sandbox.up(fleet=len(HOSTS), full=FULL)  # whatever happened, the victim is back
    release(sandbox)
    print(f"\nfaults injected on sandbox hosts: {len(seen)} ({', '.join(seen)})")


def test_two_converges_at_once_the_second_refuses_clearly(
    sandbox: Sandbox, inventory: Path, faults_seen
):
    shell = remote(sandbox, VICTIM)
    shell.check_output(f"rm -f {SECRET}")
    hold_inside_the_secret_operation(sandbox)
    first: list[ConvergeResult] = []
    run = threading.Thread(target=lambda: first.append(converge([inventory], limit=[VICTIM])))
    run.start()
    wait_for_marker(sandbox)
    second = converge([inventory], limit=[VICTIM])
    faults_seen.append("two converges at once")
    assert second.returncode != 0
    assert "another converge is running on this host" in second.stderr, second.stderr[-2000:]
    release(sandbox)
    shell.check_output("pkill -f '[s]leep 600' || true")  # the held `install` gives up
    run.join(timeout=300)
    assert first and first[0].returncode != 0  # its held command failed: not a half write
    assert not shell.file(SECRET).exists
    again = converge([inventory], limit=[VICTIM])  # the lock went with the first's session
    assert again.returncode == 0, again.stderr[-3000:]
    assert shell.file(SECRET).exists
