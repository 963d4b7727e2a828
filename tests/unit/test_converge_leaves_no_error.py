"""The converge on this machine (the real deploy, through pyinfra's @local connector, scope:
user in a temporary HOME, as `gpurig up --local` runs it): where drift would still report an
error about what the converge manages and cannot fix (a login file raising the core limit
after gpurig's block), the converge fails, in drift's words, naming the file and line; it
reads the host once for it, and after a change judges the state the change left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpurig.checks.judge import drift_reads, evaluate
from gpurig.facts.round_trip import HostState
from gpurig.report.render import one_line
from gpurig.spec.model import normalise

ROOT = Path(__file__).resolve().parents[2]


# The deploy, run as `gpurig up --local` runs it (pyinfra's @local connector, in a process of
# its own: pyinfra patches gevent in), counting the reads it makes of the host.
CONVERGE = """
import json, sys
from pyinfra.api import host as pyinfra_host
from gpurig.facts.round_trip import HostState
from gpurig.node.up import converge_local
from gpurig.spec.model import normalise

reads = []
get_fact = pyinfra_host.Host.get_fact

def counted(self, fact, *args, **kwargs):
    reads.append([fact.__name__, sorted(c.__name__ for c, _ in kwargs.get("reads", []))])
    return get_fact(self, fact, *args, **kwargs)

pyinfra_host.Host.get_fact = counted
failed = converge_local(normalise({"scope": "user", "core_dumps": "disabled"}))
print(json.dumps({"failed": failed and failed.said, "reads": reads}))
"""


def converge(home: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", CONVERGE], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "HOME": str(home)})  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def drift_words(home: Path) -> list[str]:
    """What drift says of this HOME's login, each error in one line: its one read (HostState,
    as over SSH), judged."""
    spec = normalise({"scope": "user", "core_dumps": "disabled"})
    fact = HostState()
    command = fact.command(reads=drift_reads(spec))
    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                          env={**os.environ, "HOME": str(home)}, check=True)  # fmt: skip
    found = evaluate(spec, fact.process(done.stdout.splitlines()))
    return [one_line(f) for f in found if f.severity == "error"]


BLOCK = (
    "# >>> gpurig core_dumps (written by gpurig: edits here are replaced) >>>\n"
    "ulimit -S -c 0 2>/dev/null || true\n"
    "# <<< gpurig core_dumps <<<\n"
)


def test_a_login_file_raising_the_limit_after_gpurigs_block_fails_the_converge(tmp_path):
    """The field note: nothing to change, drift says error, and the converge exited 0. Now it
    fails, naming the file and line in drift's words, and reads the host once for it."""
    (tmp_path / ".profile").write_text(f"export EDITOR=vi\n{BLOCK}ulimit -c unlimited\n")
    done = converge(tmp_path)
    said = done["failed"] or ""
    assert said.startswith("gpurig: login shells: "), done
    assert "~/.profile:5 `ulimit -c unlimited` raises the limit after gpurig's block" in said
    assert "remove `ulimit -c unlimited` at ~/.profile:5" in said
    assert drift_words(tmp_path) == [said.removeprefix("gpurig: ")]
    assert done["reads"] == [["HostState", ["LoginProfile", "LoginShell"]]]  # the one read
    before = (tmp_path / ".profile").read_text()
    assert before.endswith("ulimit -c unlimited\n")  # the user's line is the user's


def test_a_converged_host_is_read_once_and_passes(tmp_path: Path) -> None:
    (tmp_path / ".profile").write_text(f"export EDITOR=vi\n{BLOCK}")
    assert converge(tmp_path) == {
        "failed": None, "reads": [["HostState", ["LoginProfile", "LoginShell"]]]
    }  # fmt: skip


def test_the_login_shell_is_judged_after_the_converge_rewrote_its_block(tmp_path: Path):
    """gpurig's line removed from its block, and the user's raise after it: drift says both.
    The converge rewrites its block at the end of the file, reads the login shell again (one
    read more, of that alone), finds 0 and passes: the one read's answer was history."""
    (tmp_path / ".profile").write_text(
        f"{BLOCK.replace('ulimit -S -c 0 2>/dev/null || true', 'true')}ulimit -c unlimited\n"
    )
    assert len(drift_words(tmp_path)) == 2
    done = converge(tmp_path)
    assert done["failed"] is None, done
    # The one read, the plans' own fresh reads after the first change, then the login shell.
    reads = done["reads"]
    assert reads[0] == ["HostState", ["LoginProfile", "LoginShell"]]
    assert reads[-1] == ["HostState", ["LoginShell"]]
    assert all(read[0] != "HostState" for read in reads[1:-1]), reads
    assert drift_words(tmp_path) == []


# The same deploy as `pyinfra -y` runs it (operations built while executing): an inventory of
# this machine, as pyinfra's own inventory files declare one.
INVENTORY = """
from gpurig.spec.model import normalise
hosts = [("@local", {"spec": normalise({"scope": "user", "core_dumps": "disabled"})})]
"""


def pyinfra_y(home: Path) -> subprocess.CompletedProcess[str]:
    inventory = home / "inventory.py"
    inventory.write_text(INVENTORY)
    return subprocess.run(
        [sys.executable, "-m", "pyinfra", "-y", str(inventory), "deploys/gpu_host.py"],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "HOME": str(home)},
        timeout=300,
    )  # fmt: skip


def test_under_pyinfra_y_the_converge_fails_too_and_judges_after_its_change(tmp_path: Path):
    raised = tmp_path / "raised"
    raised.mkdir()
    (raised / ".profile").write_text(f"export EDITOR=vi\n{BLOCK}ulimit -c unlimited\n")
    done = pyinfra_y(raised)
    assert done.returncode != 0
    words = drift_words(raised)
    assert len(words) == 1 and f"gpurig: {words[0]}" in done.stderr, done.stderr[-3000:]
    moved = tmp_path / "moved"  # gpurig's line gone from its block: the block is rewritten last
    moved.mkdir()
    (moved / ".profile").write_text(
        f"{BLOCK.replace('ulimit -S -c 0 2>/dev/null || true', 'true')}ulimit -c unlimited\n"
    )
    done = pyinfra_y(moved)
    assert done.returncode == 0, done.stderr[-3000:]
    assert drift_words(moved) == []
