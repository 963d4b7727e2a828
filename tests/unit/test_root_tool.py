"""What root runs on a node is found in the system's directories only (facts.round_trip's
root_tool), as shutil.which finds it there: an executable file, never a directory or a file
it may not run, never through the caller's PATH."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpurig.facts import round_trip
from gpurig.facts.round_trip import ROOT_PATH, root_tool


@pytest.mark.parametrize("name", ["sh", "dmesg", "stat", "no-such-tool-gpurig"])
def test_the_same_answer_as_shutil_which_over_the_system_s_directories(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    planted = tmp_path / name
    planted.write_text("#!/bin/sh\n")
    planted.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")  # the caller's PATH counts for nothing
    assert root_tool(name) == shutil.which(name, path=ROOT_PATH)


def test_a_directory_or_a_file_root_may_not_run_is_passed_over(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first, second, third = (tmp_path / d for d in ("first", "second", "third"))
    (first / "scontrol").mkdir(parents=True)
    second.mkdir()
    (second / "scontrol").write_text("#!/bin/sh\n")  # 0644: not executable
    third.mkdir()
    (third / "scontrol").write_text("#!/bin/sh\n")
    (third / "scontrol").chmod(0o755)
    monkeypatch.setattr(round_trip, "ROOT_PATH", f"{first}:{second}:{third}")
    assert root_tool("scontrol") == str(third / "scontrol")
    (third / "scontrol").unlink()
    assert root_tool("scontrol") is None
