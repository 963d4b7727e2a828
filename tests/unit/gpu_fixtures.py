"""Read a recorded GPU fixture without its `# source:` header block."""

from __future__ import annotations

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


def recorded_command(name: str) -> str:
    """The command a fixture was recorded from (its `# command:` header line): a test can then
    hold that gpurig runs exactly what was recorded."""
    for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines():
        if line.startswith("# command: "):
            return line.removeprefix("# command: ")
    raise ValueError(f"{name} names no '# command:'")
