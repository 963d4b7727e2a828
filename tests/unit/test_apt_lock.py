"""How the converge's apt commands wait for another apt or dpkg (deploys.packages.apt), run here
with a stand-in that refuses as apt does while a lock is held (the real apt and a real held
lock: tests/integration/test_rental_faults.py)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from gpurig.deploys import packages

HELD = "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 812 (apt-get)"


def stand_in(tmp_path: Path) -> str:
    """A command that fails like `apt-get update` while `released` does not exist."""
    released = tmp_path / "released"
    return (f"sh -c 'if [ -e {released} ]; then echo updated; else echo \"{HELD}\" >&2; "
            "exit 100; fi'")  # fmt: skip


def test_a_held_lock_is_waited_for_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(packages, "lock_wait", lambda: 30)
    pipe = subprocess.PIPE
    command = ["sh", "-c", packages.apt(stand_in(tmp_path))]
    waiter = subprocess.Popen(command, stdout=pipe, stderr=pipe, text=True)
    time.sleep(4)
    assert waiter.poll() is None  # still waiting
    (tmp_path / "released").touch()
    out, err = waiter.communicate(timeout=30)
    assert waiter.returncode == 0 and out == "updated\n"
    assert err.count("gpurig: waiting up to 30 s for another apt or dpkg") == 1
    assert "/var/lib/apt/lists/lock. It is held by process 812 (apt-get)" in err


def test_a_lock_held_past_the_wait_fails_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(packages, "lock_wait", lambda: 2)
    start = time.monotonic()
    done = subprocess.run(["sh", "-c", packages.apt(stand_in(tmp_path))],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 100 and 2 <= time.monotonic() - start < 10
    assert f"gpurig: gave up after waiting 2 s for another apt or dpkg: {HELD}" in done.stderr


def test_another_failure_is_not_waited_for(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(packages, "lock_wait", lambda: 30)
    command = "sh -c 'echo \"E: Unable to locate package nope\" >&2; exit 100'"
    start = time.monotonic()
    done = subprocess.run(["sh", "-c", packages.apt(command)], capture_output=True, text=True)
    assert done.returncode == 100 and time.monotonic() - start < 2
    assert done.stderr == "E: Unable to locate package nope\n"


def test_every_apt_get_waits_for_dpkg_itself(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(packages, "lock_wait", lambda: 600)
    command = packages.apt_get("install -y -q -- tmux")
    assert "apt-get -o DPkg::Lock::Timeout=600 install -y -q -- tmux" in command
