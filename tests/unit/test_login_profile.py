"""gpurig's blocks in a user's login file, for real in a shell with a temporary HOME: the
file bash reads is the one written, the user's own lines stay as they are (a file without a
final newline, a linked dotfile), a block is replaced or removed whole, and the fact reads
back only gpurig's lines, refusing a block without its end."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpurig.deploys.writes import put_home, write_block
from gpurig.facts.gpurig_files import FileDigests
from gpurig.facts.gpurig_user import LoginProfile
from gpurig.plans.profile import block
from gpurig.sandbox.manager import Paths, write_access_files
from gpurig.sandbox.proc import SandboxError
from gpurig.sandbox.state import HostRecord, State
from gpurig.sandbox.users import check_name

CORE = ["ulimit -S -c 0 2>/dev/null || true"]


def sh(home: Path, script: str) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(home), "PATH": os.environ["PATH"]}
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)


def profile(home: Path) -> dict:
    fact = LoginProfile()
    done = sh(home, fact.command())
    assert done.returncode == 0, done.stderr
    return fact.process(done.stdout.splitlines())


def test_blocks_are_written_replaced_and_removed_keeping_the_users_lines(tmp_path: Path):
    user_lines = "export TOKEN=hunter2\nPATH=$HOME/bin:$PATH"  # no final newline
    (tmp_path / ".profile").write_text(user_lines)
    assert profile(tmp_path) == {"file": ".profile", "exists": True, "blocks": {},
                                 "damaged": []}  # fmt: skip
    for name, lines in (("core_dumps", CORE), ("docker_host", ["export A=1"])):
        assert sh(tmp_path, write_block(name, lines)).returncode == 0
    read = profile(tmp_path)
    assert read["blocks"] == {"core_dumps": CORE, "docker_host": ["export A=1"]}
    assert "hunter2" not in str(read)  # the user's lines are never read back
    assert sh(tmp_path, write_block("docker_host", ["export A=2"])).returncode == 0
    assert sh(tmp_path, write_block("core_dumps", None)).returncode == 0
    text = (tmp_path / ".profile").read_text()
    assert text.startswith(user_lines + "\n")
    assert text.count("export A=") == 1 and "export A=2" in text and "ulimit" not in text
    assert profile(tmp_path)["blocks"] == {"docker_host": ["export A=2"]}


def test_the_file_bash_reads_is_the_one_written(tmp_path: Path):
    (tmp_path / ".profile").write_text("# debian's\n")
    (tmp_path / ".bash_profile").write_text("# mine\n")
    assert sh(tmp_path, write_block("core_dumps", CORE)).returncode == 0
    assert profile(tmp_path)["file"] == ".bash_profile"
    assert "ulimit" in (tmp_path / ".bash_profile").read_text()
    assert (tmp_path / ".profile").read_text() == "# debian's\n"
    login = subprocess.run(["bash", "-lc", "ulimit -c"], env={"HOME": str(tmp_path), "PATH":
                           os.environ["PATH"]}, capture_output=True, text=True)  # fmt: skip
    assert login.stdout.strip() == "0"


def test_a_missing_login_file_is_made_and_a_linked_one_written_through(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert profile(empty) == LoginProfile.default()
    assert sh(empty, write_block("core_dumps", CORE)).returncode == 0
    assert profile(empty)["blocks"] == {"core_dumps": CORE}
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "profile").write_text("# kept in git\n")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".profile").symlink_to(dotfiles / "profile")
    assert sh(linked, write_block("core_dumps", CORE)).returncode == 0
    assert (linked / ".profile").is_symlink()
    assert "ulimit" in (dotfiles / "profile").read_text()


def test_a_block_without_its_end_is_refused_and_kept(tmp_path: Path):
    damaged = "# >>> gpurig core_dumps (written by gpurig: edits here are replaced) >>>\n"
    (tmp_path / ".profile").write_text(f"{damaged}{CORE[0]}\nexport MINE=1\n")
    read = profile(tmp_path)
    assert read["damaged"] == ["core_dumps"]
    [change] = block("core_dumps.profile", "core_dumps", CORE, read)
    assert change.refused and "no end marker" in change.actual
    # The writer keeps such lines whole even if it were run.
    assert sh(tmp_path, write_block("core_dumps", None)).returncode == 0
    assert "export MINE=1" in (tmp_path / ".profile").read_text()


def test_home_files_are_written_atomically_and_read_by_digest(tmp_path: Path):
    path = "~/.config/containers/registries.conf.d/90-gpurig.conf"
    assert sh(tmp_path, put_home("# Managed by gpurig.\n", path, "644")).returncode == 0
    written = tmp_path / ".config/containers/registries.conf.d/90-gpurig.conf"
    assert written.read_text() == "# Managed by gpurig.\n"
    assert oct(written.stat().st_mode & 0o777) == "0o644"
    assert not list(written.parent.glob("*.gpurig-*"))
    fact = FileDigests()
    done = sh(tmp_path, fact.command(paths=[path]))
    assert fact.process(done.stdout.splitlines())[path]["mode"] == "644"


def test_sandbox_users_are_recorded_as_user_scope_hosts(tmp_path: Path):
    state = State(name="t", users=["alice"])
    state.hosts["full-1"] = HostRecord("full-1", "full", 1, address="10.1.0.2",
                                       host_key="ssh-ed25519 AAAA")  # fmt: skip
    paths = Paths(tmp_path)
    write_access_files(paths, state)
    inventory = paths.inventory.read_text()
    assert "full-1-alice:" in inventory and "scope: user" in inventory
    assert "Host full-1-alice\n  HostName 10.1.0.2\n  User alice\n" in paths.ssh_config.read_text()
    assert check_name("alice") == "alice"
    for bad in ("root", "Alice", "a b", "-x"):
        with pytest.raises(SandboxError):
            check_name(bad)
