"""Root reads that another local account tries to stall, planted here and
read as root for real: a venv owner's .pth daemonising a child that holds the read's pipe, and
a core file whose open blocks (a lease: `[ -f ]` says regular file, `open()` waits 45 s for the
holder). Each read ends at once and leaves no process of the planter's behind."""

from __future__ import annotations

import fcntl
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpurig.facts.gpurig_cleanup import CoreFiles
from gpurig.facts.gpurig_repo import EnvImports
from tests.unit.fact_values import run_here
from tests.unit.test_faults_host import ELF_CORE

NOBODY = 65534  # a uid that owns nothing on a Debian machine
# At start-up the owner's python forks a child that leaves timeout's process group, ignores
# TERM and HUP and keeps the read's stdout open for an hour.
DAEMON_PTH = (
    "import os, signal, time; os.fork() or (os.setsid(), "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN), signal.signal(signal.SIGHUP, signal.SIG_IGN), "
    "time.sleep(3600), os._exit(0))\n"
)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the attack is on root: needs root to own files as other uids"
)


def alive_with(text: str) -> list[int]:
    """Live (not zombie) processes whose command line holds `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # not a process, or gone meanwhile
        if text.encode() in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


@pytest.fixture
def owned_venv(private_dir: Path) -> Iterator[Path]:
    """A venv of NOBODY's whose site-packages holds DAEMON_PTH; its checkout beside it. Any
    process the plant leaves (on a read that does not contain it) is killed afterwards."""
    venv, checkout = private_dir / "venv", private_dir / "code"
    # The system's python: the account resolves the paths it runs as itself.
    base = Path("/usr/bin/python3").resolve()
    site = venv / "lib" / base.name / "site-packages"
    site.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(
        f"home = {base.parent}\ninclude-system-site-packages = false\n"
    )
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to(base)
    (site / "gpurig_plant.pth").write_text(DAEMON_PTH)
    checkout.mkdir()
    for path in (venv, *venv.rglob("*"), checkout):
        os.lchown(path, NOBODY, NOBODY)
    yield venv
    for pid in alive_with(str(venv)):
        os.kill(pid, signal.SIGKILL)


def test_a_daemonised_child_of_the_owners_code_neither_holds_the_read_nor_outlives_it(
    owned_venv: Path, faults: Any
) -> None:
    """It kept `$(...)` open for its hour: the health check's read timed out as "could not
    check", and a blocked root shell stayed behind at every interval."""
    checkout = owned_venv.parent / "code"
    entry = run_here(EnvImports, checkout=str(checkout), venv=str(owned_venv), modules=["json"])
    left = alive_with(str(owned_venv))
    faults.plant(refused=entry["report"] is not None and not left, ran_as_root=entry["run_as"] == 0)
    assert entry["run_as"] == NOBODY and entry["refused"] is None, entry
    assert entry["report"] is not None, entry  # the read ended with the owner's report
    assert alive_with(str(owned_venv)) == []  # and nothing it started is left


@pytest.fixture
def lease_breaks_held() -> Iterator[None]:
    """SIGIO (a lease break's notice) ignored while the test holds a lease: by default it ends
    the process."""
    previous = signal.signal(signal.SIGIO, signal.SIG_IGN)
    yield
    signal.signal(signal.SIGIO, previous)


def test_a_core_file_whose_open_blocks_does_not_stall_the_read(
    private_dir: Path, lease_breaks_held: None, faults: Any
) -> None:
    """`od` opened it blocking: the read waited for the lease holder (the kernel's
    lease-break-time, 45 s by default), once per such file, per interval."""
    wait = int(Path("/proc/sys/fs/lease-break-time").read_text())
    if wait < 10:
        pytest.skip(f"lease-break-time is {wait} s here: too short to tell a stall")
    core = private_dir / "core.1"
    core.write_bytes(ELF_CORE)
    (private_dir / "core").write_bytes(ELF_CORE)  # a real leftover beside it, still found
    fd = os.open(core, os.O_WRONLY)
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
        start = time.monotonic()
        found = run_here(CoreFiles, dirs=[str(private_dir)])
        took = time.monotonic() - start
    finally:
        os.close(fd)
    faults.plant(refused=took < wait / 3, ran_as_root=False)  # nothing of the plant runs
    assert took < wait / 3, f"the read waited {took:.1f} s on a leased file"
    assert found == {str(private_dir / "core"): len(ELF_CORE)}
