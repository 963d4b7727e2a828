"""Atomic writes, run for real here: the upload lands in a fresh private stage (not next to
the file, not at pyinfra's predictable /tmp/pyinfra-<sha1>); one command copies it beside the
file under a name of its own, with the final mode before any content, and renames it over the
file. A failed copy (a full disk) leaves the old file and no temporary, and names the disk."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pyinfra.api import StringCommand

from gpurig.deploys.writes import StagedUpload, put


def run(command: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", str(command)], capture_output=True, text=True)


def test_put_stages_privately_and_renames_last(tmp_path: Path):
    dest = tmp_path / "etc" / "token"
    first, upload, last = put(b"s3cret", str(dest), "0600", owner="root")
    assert isinstance(first, StringCommand) and isinstance(upload, StagedUpload)
    assert isinstance(last, StringCommand)
    stage = Path(upload.dest).parent
    assert stage.parent == Path("/tmp") and stage.name.startswith("gpurig-")
    assert len(stage.name) == len("gpurig-") + 32  # 128 random bits: nobody pre-creates it
    assert upload.connector_arguments == {"_sudo": False}  # the login's own stage
    assert b"s3cret" not in (str(first) + str(last)).encode()
    assert run(first).returncode == 0
    assert stage.stat().st_mode & 0o777 == 0o700
    assert (stage / "upload").stat().st_mode & 0o777 == 0o600  # before any content arrives
    (stage / "upload").write_bytes(b"s3cret")  # what the upload does (SFTP keeps the mode)
    assert run(last).returncode == 0
    assert dest.read_bytes() == b"s3cret" and dest.stat().st_mode & 0o777 == 0o600
    assert not stage.exists() and sorted(p.name for p in dest.parent.iterdir()) == ["token"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the stage's owner as root is the question")
def test_root_acting_locally_stages_as_itself_whatever_sudo_uid_says(tmp_path: Path):
    """`sudo gpurig up --local` keeps SUDO_UID: a stage chowned to it let that account swap a
    staged secret or daemon.json before root installed it. The stage is made by the login
    that uploads into it (no sudo), so locally as root it is root's alone."""
    first, upload, _ = put(b"s3cret", str(tmp_path / "token"), "0600")
    assert first.connector_arguments == {"_sudo": False}
    made = subprocess.run(["sh", "-c", str(first)], capture_output=True, text=True,
                          env={**os.environ, "SUDO_UID": str(ALICE)})  # fmt: skip
    stage = Path(upload.dest).parent
    try:
        assert made.returncode == 0, made.stderr
        for path in (stage, stage / "upload"):
            assert path.stat().st_uid == 0, f"{path} is uid {path.stat().st_uid}'s"
    finally:
        subprocess.run(["rm", "-rf", str(stage)], check=True)


def test_two_writes_never_share_a_stage_or_a_temporary_name():
    a, b = list(put(b"a", "/etc/a", "0644")), list(put(b"b", "/etc/a", "0644"))
    assert Path(a[1].dest).parent != Path(b[1].dest).parent
    assert str(a[2]) != str(b[2])


def test_a_failed_copy_leaves_the_old_file_and_names_the_filesystem(tmp_path: Path):
    """The copy's output goes to /dev/full here, which fails a write with ENOSPC as a disk that
    fills in the middle of one does (tests/integration/test_rental_faults.py fills a real one)."""
    dest = tmp_path / "conf"
    dest.write_text("old\n")
    first, upload, last = put(b"new\n" * 4096, str(dest), "0644")
    assert run(first).returncode == 0
    Path(upload.dest).write_bytes(b"new\n" * 4096)
    stage = Path(upload.dest).parent
    copy = f"cat {stage}/upload > "
    tmp = str(last).split(copy, 1)[1].split(" && ", 1)[0]
    done = run(str(last).replace(copy + tmp, f"{copy}/dev/full"))
    assert done.returncode != 0 and "No space left on device" in done.stderr
    assert f"gpurig: could not write {dest}, the old file is unchanged: " in done.stderr
    assert " KiB free" in done.stderr and " (mounted at /" in done.stderr
    assert dest.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["conf"]
    assert not stage.exists()


def test_an_odd_path_is_data_in_every_command(tmp_path: Path):
    dest = tmp_path / "a b" / "$(touch pwned)" / "f"
    first, upload, last = put(b"x", str(dest), "0644")
    for command in (first, last):
        if command is last:
            Path(upload.dest).write_bytes(b"x")
        done = subprocess.run(["sh", "-c", str(command)], cwd=tmp_path, capture_output=True)
        assert done.returncode == 0, done.stderr
    assert dest.read_bytes() == b"x" and not (tmp_path / "pwned").exists()


ALICE = 65534  # an account that owns nothing else here
# The attacker winning the race, every time: right after `install` makes the temporary file
# (its name is on the command line, for `ps` to show), the account that owns the directory
# swaps it for a link to a file of root's.
SWAP = (
    '#!/bin/sh\n/usr/bin/install "$@" || exit\nfor t; do :; done\nrm -f "$t"; ln -s {target} "$t"\n'
)


def _race(place: Path) -> tuple[Path, Path, dict[str, str]]:
    """A root-only file to aim at, a directory of alice's, and a PATH whose `install` swaps."""
    target, home, tools = place / "shadow", place / "alice", place / "tools"
    target.write_text("root:hash\n")
    target.chmod(0o600)
    home.mkdir()
    os.chown(home, ALICE, ALICE)
    tools.mkdir()
    (tools / "install").write_text(SWAP.format(target=target))
    (tools / "install").chmod(0o755)
    return target, home, {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}


@pytest.mark.skipif(os.geteuid() != 0, reason="the attack is on root")
def test_root_never_writes_through_a_path_the_owner_swaps(private_dir: Path, faults: Any):
    """A secret for another account: `dest: ~alice/.netrc, owner: alice` was written and chowned by
    root in alice's directory: a link she swaps in took the secret and the chown to /etc/shadow.
    Root now places it as alice (setpriv): her swap leads only where she could write herself."""
    target, home, env = _race(private_dir)
    dest = home / ".netrc"
    first, upload, last = put(b"machine x password s3cret\n", str(dest), "0600", owner="nobody")
    assert run(first).returncode == 0
    Path(upload.dest).write_bytes(b"machine x password s3cret\n")
    done = subprocess.run(["sh", "-c", str(last)], capture_output=True, text=True, env=env)
    stat = target.stat()
    faults.plant(refused=True, ran_as_root=(stat.st_uid, target.read_text()) != (0, "root:hash\n"))
    assert (stat.st_uid, target.read_text()) == (0, "root:hash\n"), "root followed the swap"
    assert done.returncode == 0, done.stderr
    assert dest.read_bytes() == b"machine x password s3cret\n" and not dest.is_symlink()
    assert (dest.stat().st_uid, dest.stat().st_mode & 0o777) == (ALICE, 0o600)
    assert sorted(p.name for p in home.iterdir()) == [".netrc"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the attack is on root")
@pytest.mark.parametrize(
    ("mode", "owner", "why"),
    [
        (0o777, None, "a group or other accounts may write {home}"),
        (0o1777, None, "other accounts may write {home}"),
        (0o755, "root", "uid 65534 can change {home}, not the declared owner root"),
        # No owner declared: the file is root's, and alice, who owns the directory, would have
        # placed it as hers (readable by her), and drift would have said nothing.
        (
            0o755,
            None,
            "uid 65534 can change {home}, and no owner is declared: the file would be root's",
        ),
    ],
)
def test_a_secret_is_refused_where_root_cannot_place_it_safely(
    private_dir: Path, faults: Any, mode: int, owner: str | None, why: str
):
    target, home, env = _race(private_dir)
    home.chmod(mode)
    dest = home / ".netrc"
    first, upload, last = put(b"s3cret\n", str(dest), "0600", owner=owner)
    assert run(first).returncode == 0
    Path(upload.dest).write_bytes(b"s3cret\n")
    done = subprocess.run(["sh", "-c", str(last)], capture_output=True, text=True, env=env)
    faults.plant(refused=done.returncode != 0, ran_as_root=target.read_text() != "root:hash\n")
    assert done.returncode == 1 and not dest.exists() and not Path(upload.dest).exists()
    assert f"could not write {dest}, the old file is unchanged: {why.format(home=home)}" in (
        done.stderr
    )
    assert target.read_text() == "root:hash\n" and list(home.iterdir()) == []
