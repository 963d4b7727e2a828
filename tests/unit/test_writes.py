"""Atomic writes, run for real here: the upload lands in a fresh private stage (not next to
the file, not at pyinfra's predictable /tmp/pyinfra-<sha1>); one command copies it beside the
file under a name of its own, with the final mode before any content, and renames it over the
file. A failed copy (a full disk) leaves the old file and no temporary, and names the disk."""

from __future__ import annotations

import subprocess
from pathlib import Path

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
