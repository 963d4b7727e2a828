"""Atomic writes: the file exists with its final mode before any content arrives, the upload
of a sudo login is staged in a fresh private directory (not at pyinfra's predictable
/tmp/pyinfra-<sha1>), and the rename is the last step."""

from __future__ import annotations

import subprocess
from pathlib import Path

from pyinfra.api import FileUploadCommand, StringCommand

from deploys.writes import put


def test_put_stages_privately_and_renames_last(tmp_path: Path):
    dest = tmp_path / "etc" / "token"
    first, upload, last = put(b"s3cret", str(dest), "0600", owner="root")
    assert isinstance(first, StringCommand) and isinstance(upload, FileUploadCommand)
    assert isinstance(last, StringCommand)
    stage = Path(upload.remote_temp_filename).parent
    assert stage.parent == Path("/tmp") and stage.name.startswith("gpurig-")
    assert len(stage.name) == len("gpurig-") + 32  # 128 random bits: nobody pre-creates it
    assert upload.dest == f"{dest}.gpurig-tmp" and b"s3cret" not in str(first).encode()
    # The first command, run for real: the empty file has its final mode, the stage is 0700.
    subprocess.run(["sh", "-c", str(first)], check=True)
    tmp = Path(f"{dest}.gpurig-tmp")
    assert tmp.stat().st_mode & 0o777 == 0o600 and tmp.stat().st_size == 0
    assert stage.stat().st_mode & 0o777 == 0o700
    tmp.write_bytes(b"s3cret")  # what the upload does
    subprocess.run(["sh", "-c", str(last)], check=True)
    assert dest.read_bytes() == b"s3cret" and not tmp.exists() and not stage.exists()
    assert dest.stat().st_mode & 0o777 == 0o600


def test_two_writes_never_share_a_stage():
    a = list(put(b"a", "/etc/a", "0644"))[1]
    b = list(put(b"b", "/etc/a", "0644"))[1]
    assert Path(a.remote_temp_filename).parent != Path(b.remote_temp_filename).parent
