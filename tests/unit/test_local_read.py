"""The node's own read (gpurig.read.local), run for real here: bounded in time, in bytes and
in lines, its process group killed past its time, and never kept waiting by a child that left
its session holding the pipe."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from gpurig.read import bounds
from gpurig.read.bounded import run_bounded
from gpurig.read.bounds import OutputFlood
from gpurig.read.local import lines


def alive(tag: str) -> bool:
    return subprocess.run(["pgrep", "-f", tag], capture_output=True).returncode == 0


def test_a_child_that_leaves_the_session_holding_the_pipe_keeps_no_one_waiting(tmp_path: Path):
    tag = f"sleep 3{time.monotonic_ns() % 1000:03d}"
    script = f"setsid sh -c 'exec {tag}' & echo read; exit 0"
    start = time.monotonic()
    out = run_bounded(["/bin/sh", "-c", script], timeout=20)
    took = time.monotonic() - start
    subprocess.run(["pkill", "-f", tag])
    assert out == b"read\n"
    assert took < 2, f"waited {took:.1f} s for a child that holds the pipe"


def test_past_its_time_the_read_is_none_and_its_group_is_gone():
    tag = f"sleep 4{time.monotonic_ns() % 1000:03d}"
    start = time.monotonic()
    assert run_bounded(["/bin/sh", "-c", f"{tag} & {tag}; echo late"], timeout=0.5) is None
    assert time.monotonic() - start < 5
    assert not alive(tag)  # the background child too: the whole group was killed


def test_bytes_past_the_bound_are_drained_then_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setattr(bounds, "MAX_OUTPUT_BYTES", 1 << 20)
    done = tmp_path / "done"
    with pytest.raises(OutputFlood, match="1048576 bytes on stdout"):
        run_bounded(["/bin/sh", "-c", f"yes | head -c 8388608; touch {done}"], timeout=60)
    assert done.exists()  # it ran to its end: what it printed past the bound was drained


def test_lines_past_the_bound_are_refused_before_any_is_made(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(bounds, "MAX_OUTPUT_LINES", 1000)
    assert lines(b"a\n" * 1000) == ["a"] * 1000
    with pytest.raises(OutputFlood, match=f"{bounds.MAX_OUTPUT_LINES} lines"):
        lines(b"\n" * 1001)


def test_lines_split_at_newlines_only_and_decode_with_replacement():
    assert lines(b"a\rb\x0bc\n\xff\n\n") == ["a\rb\x0bc", "\ufffd", ""]
