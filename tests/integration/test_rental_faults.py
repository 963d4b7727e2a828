"""Rentals as they boot and break, on real sandbox hosts: unattended-upgrades holding dpkg's
locks (a stand-in named like it holds them, with fcntl locks as apt takes them), a disk that
fills in the middle of a write (a tiny tmpfs), the controller interrupted mid-converge
(SIGTERM, SIGINT), a host whose link goes down in the middle of `gpurig drift`; and a -vvv log
of a real converge, read as someone holding it would read it against a short secret."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import REPO_ROOT, Sandbox, remote, write_inventory

from gpurig.node.lock import LOCK
from gpurig.remote.converge import converge
from tests.logguess import guesses_confirmed

pytestmark = pytest.mark.disruptive  # mounts, stand-ins and link cuts, each undone after

FULL, FLEET = "full-1", ["fleet-001", "fleet-002", "fleet-003"]
VICTIM = FLEET[-1]
HOLDER = "/usr/local/sbin/unattended-upgr"  # a copy of python3: `ps` and apt name it so
HELD = "/run/gpurig-holds"
# Holds dpkg's or apt's locks as apt does (fcntl) until the test lets go: once it holds every
# lock (argv[1:]) it makes HELD.<its pid>, and it ends when that file is removed.
HOLD_LOCKS = (
    "import fcntl, os, sys, time\n"
    "files = [open(p, 'w') for p in sys.argv[1:]]\n"
    "[fcntl.lockf(f, fcntl.LOCK_EX) for f in files]\n"
    f"held = '{HELD}.%d' % os.getpid()\n"
    "open(held, 'w').close()\n"
    "while os.path.exists(held):\n"
    "    time.sleep(0.05)\n"
)
TINY = "/mnt/gpurig-tiny"


def pyinfra_call(inventory: Path, limit: str, *args: str, data: dict[str, str] | None = None,
                 ) -> dict[str, Any]:  # fmt: skip
    """subprocess's arguments for `pyinfra -y ARGS inventory.py deploys/gpu_host.py` on one
    host, as a user runs it."""
    argv = [sys.executable, "-m", "pyinfra", "-y", *args, "--limit", limit]
    for key, value in (data or {}).items():
        argv += ["--data", f"{key}={value}"]
    env = {**os.environ, "GPURIG_INVENTORY": str(inventory)}
    return {"args": [*argv, "inventory.py", "deploys/gpu_host.py"], "cwd": REPO_ROOT, "env": env}


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 300,
               run: subprocess.Popen[str] | None = None) -> None:  # fmt: skip
    """Poll `condition` (each step of a fault waits on what it needs, never on a time window);
    fail naming `what` after `seconds`, or at once when `run`, which should get there, ends."""
    deadline = time.monotonic() + seconds
    while not condition():
        ended = run is not None and run.poll() is not None
        assert not ended or condition(), f"the run ended (exit {run.returncode}) before {what}"
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.1)


def hold_locks(sandbox: Sandbox, *locks: str) -> int:
    """Start the stand-in on the full host; its pid once it holds every lock."""
    shell = remote(sandbox, FULL)
    shell.check_output(f"install -m 755 /usr/bin/python3 {HOLDER}")
    script = HOLD_LOCKS.replace("'", "'\"'\"'")
    pid = shell.check_output(
        f"nohup {HOLDER} -c '{script}' {' '.join(locks)} >/dev/null 2>&1 & echo $!"
    )
    wait_until(lambda: shell.run(f"test -e {HELD}.{pid}").rc == 0, "the stand-in holds", 60)
    return int(pid)


def release(sandbox: Sandbox, *holders: int) -> None:
    """The stand-ins let go of their locks and end."""
    remote(sandbox, FULL).run("rm -f " + " ".join(f"{HELD}.{pid}" for pid in holders))


def alive(sandbox: Sandbox, pid: int) -> bool:
    return remote(sandbox, FULL).run(f"kill -0 {pid}").rc == 0


@pytest.fixture(scope="module")
def apt_inventory(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rental") / "apt.yaml"
    return write_inventory(sandbox, path, {FULL: {"engine": "none", "packages": ["tree"]}})


def test_a_held_dpkg_lock_is_waited_for_naming_it(
    sandbox: Sandbox, apt_inventory: Path, faults: Any, tmp_path: Path
):
    """unattended-upgrades after boot: apt's lists lock and dpkg's frontend lock, each held
    until the converge is seen waiting for it. The converge says what it waits for and who
    holds it, installs once both are free, and kills neither holder."""
    shell = remote(sandbox, FULL)
    shell.run("apt-get remove -y -q tree >/dev/null 2>&1")
    lists = hold_locks(sandbox, "/var/lib/apt/lists/lock")
    frontend = hold_locks(sandbox, "/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock")
    faults.injected += 2
    waiting = (  # gpurig's line, with the refusal apt gave it (not the -vvv echo of the command)
        "gpurig: waiting up to 120 s for another apt or dpkg to finish (unattended-upgrades "
        "holds their locks for minutes after boot): E: Could not get lock "
        f"/var/lib/apt/lists/lock. It is held by process {lists} (unattended-upgr)"
    )
    log = tmp_path / "converge.log"
    with log.open("w") as out:
        run = subprocess.Popen(**pyinfra_call(apt_inventory, FULL, "-vvv",
                                              data={"apt_lock_wait": "120"}),
                               stdout=out, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        wait_until(lambda: waiting in log.read_text(), "gpurig said what it waits for", run=run)
        assert alive(sandbox, lists) and not shell.package("tree").is_installed
        release(sandbox, lists)  # the lists are refreshed, then the install meets dpkg's lock
        installing = "pgrep -a -x apt-get | grep -q ' install '"
        wait_until(lambda: shell.run(installing).rc == 0, "the install waits for dpkg", run=run)
        assert alive(sandbox, frontend) and not shell.package("tree").is_installed
    finally:
        release(sandbox, lists, frontend)
        run.wait(timeout=600)
    said = log.read_text()
    assert run.returncode == 0, said[-3000:]
    assert shell.package("tree").is_installed
    print(f"\nsaid: {next(line for line in said.splitlines() if waiting in line).strip()[:200]}")


def test_a_lock_held_past_the_wait_fails_naming_the_lock_and_kills_nothing(
    sandbox: Sandbox, apt_inventory: Path, faults: Any
):
    shell = remote(sandbox, FULL)
    shell.run("apt-get remove -y -q tree >/dev/null 2>&1")
    holder = hold_locks(sandbox, "/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock")
    faults.injected += 1
    try:
        start = time.monotonic()
        run = converge([apt_inventory], limit=[FULL], data={"apt_lock_wait": "8"})
        took = time.monotonic() - start
        assert run.returncode != 0, run.stderr[-3000:]
        assert "Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend)" in (
            run.stderr
        ), run.stderr[-3000:]
        assert "gpurig: gave up after waiting 8 s for another apt or dpkg" in run.stderr
        assert took < 60, took
        assert alive(sandbox, holder)  # never killed
        print(
            f"\nfailed after {took:.0f} s: "
            + next(line for line in run.stderr.splitlines() if "gave up" in line).strip()[:200]
        )
        assert not shell.package("tree").is_installed
    finally:
        release(sandbox, holder)


@pytest.fixture
def tiny(sandbox: Sandbox) -> Iterator[str]:
    """A 256 KiB tmpfs on the full host (root's alone: a secret is never placed where other
    accounts may write), unmounted after."""
    shell = remote(sandbox, FULL)
    shell.check_output(
        f"mkdir -p {TINY} && mount -t tmpfs -o size=256k,mode=0755 gpurig-tiny {TINY}"
    )
    yield TINY
    shell.run(f"umount {TINY}")


def fill(sandbox: Sandbox, where: str) -> None:
    remote(sandbox, FULL).run(f"dd if=/dev/zero of={where}/fill bs=4k 2>/dev/null; sync")


@pytest.mark.parametrize("full", ["target", "stage"])
def test_a_disk_full_in_the_middle_of_a_write_leaves_the_old_file_and_names_the_disk(
    sandbox: Sandbox, tiny: str, tmp_path: Path, faults: Any, full: str
):
    """`target`: the file's own filesystem fills while the new content is copied in. `stage`:
    /tmp fills (a root disk at 100 % takes /tmp with it) while the upload is staged there."""
    shell = remote(sandbox, FULL)
    src, dest = tmp_path / "token", f"{tiny}/token"
    src.write_text("old token\n")
    inventory = write_inventory(sandbox, tmp_path / "inv.yaml", {FULL: {
        "engine": "none", "secrets": [{"src": str(src), "dest": dest}]}})  # fmt: skip
    first = converge([inventory], limit=[FULL])
    assert first.returncode == 0, first.stderr[-3000:]
    assert shell.file(dest).content_string == "old token\n"
    src.write_text("new token " * 20000)  # 200 KB
    if full == "target":
        shell.check_output(f"dd if=/dev/zero of={tiny}/fill bs=1k count=100 2>/dev/null")
    else:  # a tiny, full /tmp for the upload
        shell.check_output("mount -t tmpfs -o size=64k gpurig-tiny-stage /tmp")
        fill(sandbox, "/tmp")
    faults.injected += 1
    try:
        failed = converge([inventory], limit=[FULL])
    finally:
        if full == "stage":
            shell.run("umount /tmp")
    assert failed.returncode != 0, failed.stderr[-3000:]  # one host, failed: no JSON result
    if full == "target":
        assert "No space left on device" in failed.stderr, failed.stderr[-3000:]
        assert f"gpurig: could not write {dest}, the old file is unchanged: gpurig-tiny " in (
            failed.stderr
        ), failed.stderr[-3000:]
        assert f"(mounted at {tiny}) has " in failed.stderr
    else:
        assert "gpurig: the upload into /tmp/gpurig-" in failed.stderr, failed.stderr[-3000:]
        assert "; gpurig-tiny-stage (mounted at /tmp) has " in failed.stderr
        assert "nothing was written in place" in failed.stderr
    print("\n" + next(line for line in failed.stderr.splitlines() if "gpurig: " in line).strip())
    old = shell.file(dest).content_string
    faults.bytes_lost += 0 if old == "old token\n" else len("old token\n")
    assert old == "old token\n"
    left = shell.check_output(f"ls -A {tiny}").split()
    assert sorted(left) == (["fill", "token"] if full == "target" else ["token"])
    shell.check_output(f"rm -f {tiny}/fill")
    again = converge([inventory], limit=[FULL])  # room again: the write completes
    assert again.returncode == 0, again.stderr[-3000:]
    assert shell.file(dest).content_string == src.read_text()


# On PATH before /usr/bin in sshd's sessions: holds inside a command until MARKER is gone.
MARKER = "/tmp/gpurig-rental-held"
HOLD = (
    f'#!/bin/sh\ntouch {MARKER}\nwhile [ -e {MARKER} ]; do sleep 0.1; done\nexec "$0.real" "$@"\n'
)
SFTP = "/usr/lib/openssh/sftp-server"
SECRET_DIR = "/root/.gpurig-rental"


def stand_in(sandbox: Sandbox, name: str, target: str) -> None:
    """`target` replaced by a stand-in that holds, then runs the real one."""
    shell = remote(sandbox, name)
    shell.check_output(f"rm -f {MARKER}; [ -e {target}.real ] || cp -p {target} {target}.real")
    shell.check_output(f"printf '%s' '{HOLD}' > {target} && chmod 755 {target}")


def restore(sandbox: Sandbox, name: str, target: str) -> None:
    remote(sandbox, name).run(f"rm -f {MARKER}; [ -e {target}.real ] && mv -f {target}.real "
                              f"{target}")  # fmt: skip


def on_host(sandbox: Sandbox, name: str, path: str) -> Path:
    """`path` on fleet host `name`, from here (through its namespace's root): reachable when
    the host's link is down."""
    return Path(f"/proc/{sandbox.state.hosts[name].pid}/root{path}")


def wait_for_marker(sandbox: Sandbox, name: str) -> None:
    wait_until(on_host(sandbox, name, MARKER).exists, f"{name} reached the held command", 120)


@pytest.mark.parametrize(
    ("sig", "where"),
    [(signal.SIGTERM, "place"), (signal.SIGINT, "upload")],
    ids=["SIGTERM-while-placing", "SIGINT-while-uploading"],
)
def test_an_interrupted_converge_leaves_no_half_file_and_the_next_run_completes(
    sandbox: Sandbox, tmp_path: Path, faults: Any, sig: signal.Signals, where: str
):
    """The controller is interrupted inside the secret's write: while its data is uploaded,
    or while the host places it (a command the host then finishes alone). Afterwards: the file
    is whole (old or new), no temporary beside it, the lock free; the next converge completes
    and the one after changes nothing."""
    name = FLEET[0]
    shell = remote(sandbox, name)
    dest = f"{SECRET_DIR}/token"
    shell.check_output(f"rm -rf {SECRET_DIR} && mkdir -p {SECRET_DIR} && echo old > {dest}")
    src = tmp_path / "token"
    src.write_text("new token\n" * 100)
    inventory = write_inventory(sandbox, tmp_path / "inv.yaml", {name: {
        "core_dumps": "disabled", "secrets": [{"src": str(src), "dest": dest}]}})  # fmt: skip
    target = SFTP if where == "upload" else "/usr/bin/install"
    stand_in(sandbox, name, target)
    try:
        proc = subprocess.Popen(**pyinfra_call(inventory, name), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        wait_for_marker(sandbox, name)
        proc.send_signal(sig)
        status = proc.wait(timeout=60)
        print(f"\n{sig.name} while {where}: the converge exited {status}")
        assert status == 128 + sig  # not 0: an interrupted converge is no success
        faults.injected += 1
        shell.run(f"rm -f {MARKER}")  # the held command goes on (the controller is gone)
        expected = "old\n" if where == "upload" else src.read_text()  # placing ran to its end
        deadline = time.monotonic() + 20
        while shell.file(dest).content_string != expected and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        restore(sandbox, name, target)
    content = shell.file(dest).content_string
    faults.bytes_lost += 0 if content == expected else len(content)
    assert content == expected
    assert shell.check_output(f"ls -A {SECRET_DIR}").split() == ["token"]  # no temporary
    assert shell.run(f"flock -n -E 75 {LOCK} true").rc == 0  # the lock went with the session
    second = converge([inventory], limit=[name])
    assert second.returncode == 0, second.stderr[-3000:]
    assert shell.file(dest).content_string == src.read_text()
    third = converge([inventory], limit=[name])
    assert third.returncode == 0 and third.change_count == 0, third.changed


DRIFT_TIMEOUT = 20  # seconds: the drift's per-host read timeout, shortened for the test
DRIFT = f"""
from gevent import monkey
monkey.patch_all()
import sys
import gpurig.checks.judge
gpurig.checks.judge.PROBE_TIMEOUT = {DRIFT_TIMEOUT}
from gpurig.cli.main import main
main(sys.argv[1:])
"""


def test_a_host_whose_link_goes_down_mid_read_fails_alone_within_its_timeout(
    sandbox: Sandbox, tmp_path: Path, faults: Any
):
    """`gpurig drift` over three fleet hosts; the victim's link goes down while its read is
    under way (a stand-in nvidia-smi holds the probe there until the link is down). The victim
    fails within the read timeout, the other two are reported as they are."""
    inventory = write_inventory(sandbox, tmp_path / "inv.yaml",
                                {name: {"core_dumps": "disabled"} for name in FLEET})  # fmt: skip
    shell = remote(sandbox, VICTIM)
    # The probe's first nvidia-smi marks the read as under way and holds until the test, the
    # link cut, removes the marker; later ones fail at once (no GPU): were the victim still
    # reachable, its read would end at once, well within the timeout.
    smi = (f"#!/bin/sh\n[ -e {MARKER}.done ] && exit 1\ntouch {MARKER}.done {MARKER}\n"
           f"while [ -e {MARKER} ]; do sleep 0.1; done\n")  # fmt: skip
    smi_path = "/usr/local/bin/nvidia-smi"
    shell.check_output(f"rm -f {MARKER} {MARKER}.done; printf '%s' '{smi}' > {smi_path} && "
                       f"chmod 755 {smi_path}")  # fmt: skip
    veth = sandbox.state.hosts[VICTIM].veth
    try:
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-c", DRIFT, "drift", str(inventory), "--format", "json",
             *(arg for name in FLEET for arg in ("--limit", name))],
            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_for_marker(sandbox, VICTIM)
        subprocess.run(["ip", "link", "set", veth, "down"], check=True)
        cut = time.monotonic()
        on_host(sandbox, VICTIM, MARKER).unlink()  # the read goes on, its link gone
        faults.injected += 1
        out, err = proc.communicate(timeout=DRIFT_TIMEOUT + 120)
        took = time.monotonic() - cut
    finally:
        subprocess.run(["ip", "link", "set", veth, "up"], check=True)
        shell.run(f"rm -f {smi_path} {MARKER} {MARKER}.done")
    assert proc.returncode == 1, err[-3000:]
    hosts = {h["name"]: h for h in json.loads(out)["hosts"]}
    victim_ids = [f["id"] for f in hosts[VICTIM]["findings"]]
    assert victim_ids in (["state.unreadable"], ["host.unreachable"]), hosts[VICTIM]
    for name in FLEET[:-1]:  # the others: read, judged, nothing about the connection
        ids = [f["id"] for f in hosts[name]["findings"]]
        assert hosts[name]["reachable"] and "state.unreadable" not in ids, hosts[name]
    assert took < DRIFT_TIMEOUT + 15, took  # failed within its timeout (plus disconnect)
    faults.failed_alone += 1
    print(
        f"\nlink cut {time.monotonic() - start - took:.1f} s into the drift; the victim "
        f"failed {took:.1f} s later (timeout {DRIFT_TIMEOUT} s)"
    )


def test_a_vvv_log_of_a_real_converge_confirms_no_guess_of_the_secret(
    sandbox: Sandbox, tmp_path: Path, faults: Any
):
    """A four-digit PIN as the secret, converged to a fleet host and then read again with
    `-vvv` (every command, every output): no word of the log, as a salt or a key, turns the
    PIN into a digest the log holds."""
    name = FLEET[1]
    src = tmp_path / "pin"
    src.write_text("4821")
    inventory = write_inventory(sandbox, tmp_path / "inv.yaml", {name: {
        "core_dumps": "disabled",
        "secrets": [{"src": str(src), "dest": "/root/.gpurig-pin"}]}})  # fmt: skip
    assert converge([inventory], limit=[name]).returncode == 0
    # The host's copy is current: digests compared.
    run = subprocess.run(**pyinfra_call(inventory, name, "-vvv"), capture_output=True, text=True,
                         timeout=900)  # fmt: skip
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    assert "/usr/bin/python3 -I -S -c" in log and re.search(r"public [0-9a-f]{400,}", log)
    assert converge([inventory], limit=[name]).change_count == 0  # the digests compared equal
    faults.injected += 1
    confirmed = guesses_confirmed(log, b"4821")
    faults.secrets_seen += len(confirmed)
    assert confirmed == []


def test_every_converge_above_left_the_lock_free(sandbox: Sandbox):
    for name in (FULL, *FLEET):
        assert remote(sandbox, name).run(f"flock -n -E 75 {LOCK} true").rc == 0, name


def test_a_sudo_login_writes_through_its_own_stage(sandbox: Sandbox, tmp_path: Path):
    """A login that is not root: the upload goes into a stage the login owns, root places it."""
    shell = remote(sandbox, FULL)
    shell.check_output(
        "command -v sudo >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
        "sudo >/dev/null; id deploy >/dev/null 2>&1 || useradd -m -s /bin/sh deploy; "
        "install -d -o deploy -m 700 /home/deploy/.ssh && install -o deploy -m 600 "
        "/root/.ssh/authorized_keys /home/deploy/.ssh/authorized_keys && "
        "echo 'deploy ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/deploy"
    )
    src, dest = tmp_path / "token", "/root/.gpurig-sudo/token"
    src.write_text("through sudo\n")
    inventory = write_inventory(sandbox, tmp_path / "inv.yaml", {FULL: {
        "engine": "none", "secrets": [{"src": str(src), "dest": dest}]}})  # fmt: skip
    doc = yaml.safe_load(inventory.read_text())
    doc["hosts"][FULL]["ssh"]["user"] = "deploy"
    inventory.write_text(yaml.safe_dump(doc))
    first = converge([inventory], limit=[FULL])
    assert first.returncode == 0, first.stderr[-3000:]
    secret = shell.file(dest)
    assert secret.content_string == "through sudo\n" and secret.mode == 0o600
    assert secret.user == "root"
    assert shell.check_output("find /tmp -maxdepth 1 -name 'gpurig-*' -type d") == ""
    again = converge([inventory], limit=[FULL])
    assert again.returncode == 0 and again.change_count == 0, again.changed
