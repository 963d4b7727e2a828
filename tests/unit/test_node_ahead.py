"""A node contract's read started ahead (gpurig/node/ahead.py): the command kept from the last
run is started before the checks load, used only where it is the command built now, and a
spec whose command changes between runs is read ahead no more. Real processes on this machine."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from gpurig.data import kept
from gpurig.node.ahead import VARIES, Ahead
from gpurig.read.local import collect

SPEC = b"engine: none\ncore_dumps: disabled\n"
ECHO = ["/bin/sh", "-c", "echo read-ahead"]


def kept_reads(where: Path) -> list[object]:
    """What each read copy in `where` holds (a copy is its key and its value)."""
    copies = [
        kept.read(where, p.name.rsplit(".", 1)[0], os.geteuid()) for p in where.glob("read.*")
    ]
    return [copy[1] for copy in copies if isinstance(copy, tuple)]


def test_the_first_run_keeps_its_command_and_the_next_starts_it(run_dir: Path) -> None:
    first = Ahead(SPEC, None, "npd")
    assert first.proc is None
    assert first.take(ECHO) is None  # nothing started: the caller runs it, and it is kept
    assert kept_reads(run_dir) == [ECHO]
    second = Ahead(SPEC, None, "npd")
    assert second.proc is not None
    proc, deadline = second.take(list(ECHO)) or (None, 0.0)
    assert proc is second.proc
    assert collect(proc, deadline) == b"read-ahead\n"


def test_each_mode_and_spec_has_a_command_of_its_own(run_dir: Path) -> None:
    Ahead(SPEC, None, "npd").take(ECHO)
    assert Ahead(SPEC, None, "prolog").proc is None
    assert Ahead(SPEC + b"# changed\n", None, "npd").proc is None
    assert Ahead(SPEC, None, "npd").proc is not None


def test_a_command_that_is_not_the_one_built_now_is_stopped_and_not_read(
    run_dir: Path, tmp_path: Path
) -> None:
    done = tmp_path / "done"
    slow = ["/bin/sh", "-c", f"sleep 5; touch {done}"]
    Ahead(SPEC, None, "npd").take(slow)
    ahead = Ahead(SPEC, None, "npd")
    assert ahead.proc is not None
    assert ahead.take(ECHO) is None  # another command now: the caller runs that one
    assert ahead.proc.poll() is not None and not done.exists()
    # The spec's command changed between runs: it is read ahead no more.
    assert kept_reads(run_dir) == [VARIES]
    again = Ahead(SPEC, None, "npd")
    assert again.proc is None
    assert again.take(ECHO) is None
    assert kept_reads(run_dir) == [VARIES]


def test_a_kept_command_another_account_may_write_is_not_run(run_dir: Path, tmp_path: Path) -> None:
    planted = tmp_path / "planted"
    Ahead(SPEC, None, "npd").take(["/bin/sh", "-c", f"touch {planted}"])
    [copy] = run_dir.glob("read.*")
    copy.chmod(copy.stat().st_mode | stat.S_IWOTH)
    ahead = Ahead(SPEC, None, "npd")
    assert ahead.proc is None and not planted.exists()


def test_a_contract_judges_the_same_with_its_read_started_ahead(
    tmp_path: Path, run_dir: Path
) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text("engine: none\ncore_dumps: disabled\nchecks: {disk_free_min: 1g}\n")
    out = tmp_path / "out"
    argv = [sys.executable, "-I", "-m", "gpurig", "drift", "--local", "--spec", str(spec)]
    argv += ["--mode", "npd", "--format", "json", "--output", str(out)]
    env = {**os.environ, "GPURIG_RUNTIME_DIR": str(run_dir)}
    reports = []
    for _ in range(2):  # the first keeps its command, the second reads it ahead
        subprocess.run(argv, env=env, cwd=Path(__file__).parents[2], capture_output=True)
        reports.append(json.loads(out.read_text()))
    assert [r for r in kept_reads(run_dir) if isinstance(r, list)], "no command kept"
    for report in reports:
        for host in report["hosts"]:
            host.pop("duration_seconds", None)
    assert reports[0] == reports[1]
    assert reports[0]["hosts"][0]["findings"], "the spec's drift was not judged"


def test_a_kept_command_that_can_no_longer_start_is_replaced_by_the_one_built(
    run_dir: Path,
) -> None:
    Ahead(SPEC, None, "npd").take(["/no/such/program", "-c", "true"])
    ahead = Ahead(SPEC, None, "npd")
    assert ahead.proc is None
    assert ahead.take(ECHO) is None
    assert kept_reads(run_dir) == [ECHO]


def test_up_starts_the_read_its_spec_made_last_time(run_dir: Path, tmp_path: Path) -> None:
    """`gpurig up --local` (a job's first line) reads ahead too, under its lock: the command
    kept by the first run is the one later runs build, so each later run used the started
    read (a command built otherwise would have marked the spec VARIES)."""
    spec, home = tmp_path / "node.yaml", tmp_path / "home"
    spec.write_text("scope: user\nengine: none\ncore_dumps: disabled\n")
    home.mkdir(mode=0o700)
    argv = [sys.executable, "-I", "-m", "gpurig", "up", "--local", "--spec", str(spec)]
    env = {**os.environ, "HOME": str(home)}
    said = []
    for _ in range(3):
        done = subprocess.run(argv, env=env, cwd="/", capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        said.append(done.stderr.strip().splitlines()[-1])
    assert said[1:] == [f"gpurig up: {os.uname().nodename} ready (already as declared)"] * 2
    kept = kept_reads(run_dir)
    assert VARIES not in kept and [r for r in kept if isinstance(r, list)]
