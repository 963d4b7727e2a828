"""Read a recorded GPU fixture without its `# source:` header block."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"


def recorded_output(path: Path) -> str:
    """A recording's raw output: the file minus its leading '# ' header lines."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    body = 0
    while body < len(lines) and lines[body].startswith("# "):
        body += 1
    return "".join(lines[body:])


def read_fixture(name: str) -> str:
    """A recorded GPU fixture's raw output."""
    return recorded_output(FIXTURES / name)


def recorded_header(path: Path) -> dict[str, str]:
    """A recording's `# field: value` header lines (source, command, machine, note)."""
    header = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("# "):
            break
        field, _, value = line.removeprefix("# ").partition(": ")
        header.setdefault(field, value)
    return header


def recorded_command(name: str) -> str:
    """The command a fixture was recorded from (its `# command:` header line): a test can then
    hold that gpurig runs exactly what was recorded."""
    command = recorded_header(FIXTURES / name).get("command")
    if command is None:
        raise ValueError(f"{name} names no '# command:'")
    return command


def run_with_stand_in(tmp_path: Path, tool: str, output: str, command: str) -> list[str]:
    """`command` run by /bin/sh with a stand-in `tool` first on PATH that prints `output` (a
    recording) and writes the arguments it was given to tmp_path/args: a fact's own shell,
    as it runs on a host, on recorded output. Returns the lines it printed."""
    (tmp_path / "output").write_text(output)
    stand_in = tmp_path / tool
    stand_in.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "args"}\ncat {tmp_path / "output"}\n')
    stand_in.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()
