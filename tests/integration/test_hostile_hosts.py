"""Hosts that answer as an attacker (or a broken box) would, on real sandbox hosts over real
SSH: stand-ins on the host's PATH print what the attack prints. Each host fails alone, with
a clear reason; nothing the operator knows is sent; nothing stalls the other hosts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support import REPO_ROOT, Sandbox, gpurig, remote, write_inventory

from gpurig.remote.converge import converge, parse_results
from gpurig.sandbox.keys import public_key

VICTIM, OTHER = "fleet-002", "fleet-003"
STANDIN = "/usr/local/bin"  # before /usr/bin on the PATH sshd gives a session (and root's)
PASSWORD = "hunter2-never-sent"


@pytest.fixture
def standin(sandbox: Sandbox) -> Iterator:
    """Put stand-ins on VICTIM for this test: `put(name, script)`; removed afterwards."""
    placed: list[str] = []

    def put(name: str, script: str) -> None:
        path = f"{STANDIN}/{name}"
        remote(sandbox, VICTIM).check_output(f"cat > {path} <<'EOF'\n{script}EOF\nchmod 755 {path}")
        placed.append(path)

    yield put
    if placed:
        remote(sandbox, VICTIM).check_output(f"rm -f {' '.join(placed)}")


def two_hosts(sandbox: Sandbox, tmp_path: Path) -> Path:
    spec = {"packages": ["sed"], "core_dumps": "disabled"}
    return write_inventory(sandbox, tmp_path / "fleet.yaml", {VICTIM: spec, OTHER: spec})


def assert_other_converged(result) -> None:
    assert OTHER not in result.failed_hosts, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]


def test_a_lock_answer_that_is_not_utf8_fails_that_host_alone(
    sandbox: Sandbox, tmp_path: Path, standin
):
    """pyinfra re-raised the UnicodeDecodeError of `\\xff held` from its parallel load: no host
    got any operation."""
    standin("flock", "#!/bin/sh\nprintf '\\377 held\\n'\nexec cat >/dev/null\n")
    result = converge([two_hosts(sandbox, tmp_path)], limit=[VICTIM, OTHER])
    assert_other_converged(result)
    assert VICTIM in result.failed_hosts
    assert "could not take the converge lock /run/gpurig/converge.lock" in result.stderr
    assert "said '\\ufffd held'" in result.stderr or "said '� held'" in result.stderr


def test_a_snapshot_of_odd_bytes_and_megabytes_fails_that_host_alone(
    sandbox: Sandbox, tmp_path: Path, standin
):
    """A 0xff then more than 2 MiB on one line stopped pyinfra's reader: the SSH window filled
    and the converge blocked for ever."""
    standin("dpkg-query", "#!/bin/sh\nprintf '\\377'\nhead -c 3145728 /dev/zero | tr '\\0' x\n")
    start = time.monotonic()
    result = converge([two_hosts(sandbox, tmp_path)], limit=[VICTIM, OTHER])
    took = time.monotonic() - start
    assert_other_converged(result)
    assert VICTIM in result.failed_hosts, result.stderr[-2000:]
    assert "the host's output could not be read" in result.stderr, result.stderr[-2000:]
    assert took < 120, took


@pytest.fixture
def password_login(sandbox: Sandbox, standin) -> str:
    """A login on VICTIM whose `sudo` wants a password (as any cluster account's does): the
    stand-in records what it was given, then prints sudo's own words."""
    root = remote(sandbox, VICTIM)
    key = public_key(sandbox.paths.client_key)
    root.check_output(
        "id pw >/dev/null 2>&1 || useradd -m -s /bin/sh pw; usermod -p '*' pw; "
        "install -d -m 700 -o pw -g pw ~pw/.ssh; "
        f"echo '{key}' > ~pw/.ssh/authorized_keys; chown pw: ~pw/.ssh/authorized_keys; "
        "rm -f /tmp/sudo-was-given"
    )
    standin(
        "sudo",
        "#!/bin/sh\n{ printf '%s\\n' \"$*\"; env; cat 2>/dev/null; } >> /tmp/sudo-was-given\n"
        "echo 'sudo: a password is required' >&2\nexit 1\n",
    )
    return "pw"


def with_login(sandbox: Sandbox, tmp_path: Path, user: str) -> Path:
    inventory = two_hosts(sandbox, tmp_path)
    document = yaml.safe_load(inventory.read_text())
    document["hosts"][VICTIM].setdefault("ssh", {})["user"] = user
    inventory.write_text(yaml.safe_dump(document))
    return inventory


def test_sudo_asking_for_a_password_gets_none_and_stops_nobody(
    sandbox: Sandbox, tmp_path: Path, password_login: str
):
    inventory = with_login(sandbox, tmp_path, password_login)
    argv = [sys.executable, "-m", "pyinfra", "-y", "--json", "--limit", VICTIM,
            "--limit", OTHER, "inventory.py", "deploys/gpu_host.py"]  # fmt: skip
    env = {**os.environ, "GPURIG_INVENTORY": str(inventory)}
    # Someone at the keyboard would type it: offered on stdin, it must never be read or sent.
    proc = subprocess.run(
        argv, cwd=REPO_ROOT, env=env, input=f"{PASSWORD}\n", capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "EOFError" not in out, out[-3000:]
    assert "sudo password:" not in out
    assert "sudo asks this login for a password; gpurig never sends one" in out, out[-3000:]
    # gpurig's words alone: not pyinfra's fact line with Python reprs, not a lock's exit code.
    assert "could not load fact" not in out and "<class" not in out, out[-3000:]
    assert "could not take the converge lock" not in out, out[-3000:]
    given = remote(sandbox, VICTIM).run("cat /tmp/sudo-was-given").stdout
    assert given, "the stand-in sudo was never asked"
    assert PASSWORD not in given and "PYINFRA_SUDO_PASSWORD" not in given
    _, _, failed = parse_results(proc.stdout)
    assert failed == [VICTIM], out[-3000:]

    drift = gpurig("drift", str(inventory), "--limit", VICTIM, "--format", "json")
    [host] = json.loads(drift.stdout)["hosts"]
    assert drift.returncode == 1 and host["reachable"] is True  # it answered SSH
    assert [f["id"] for f in host["findings"]] == ["host.sudo_password"], host
    assert "scope: user" in host["findings"][0]["fix"]
