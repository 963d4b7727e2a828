"""A read forked ahead (gpurig/read/forked.py) starts as a read started by subprocess does
(gpurig/read/bounded.py): a session of its own, from `/`, stdin and stderr on /dev/null, the
signals Python ignores at their defaults, no descriptor of its parent's; bounded's collect and
stop take it as they take a Popen. And a contract forks it before anything it could load beside
it is loaded. Real processes, each forked from a fresh interpreter (as a contract's is: pytest's
own process may have threads, or gevent's patches, by then)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What the child is: its session and group, its directory, its descriptors, what its stdin and
# stderr are, and which signals it ignores (SIGPIPE must kill a pipeline's writer, as in a shell).
PROBE = (
    'printf "%s %s %s\\n" "$(ps -o sid= -p $$)" "$(ps -o pgid= -p $$)" "$(pwd)"; '
    "ls /proc/$$/fd | sort -n | tr '\\n' ' '; echo; "
    "readlink /proc/$$/fd/0 /proc/$$/fd/2; "
    "grep SigIgn /proc/$$/status"
)
SIGPIPE = 13


def fresh(code: str, env: dict[str, str] | None = None) -> str:
    """What `code` prints, run in a new interpreter with gpurig importable."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def described(how: str) -> tuple[object, ...]:
    said = fresh(f"""
        import json, os, time
        from gpurig.read.bounded import collect
        from gpurig.read.forked import fork_exec, start
        inherited = os.dup2(os.open("/dev/null", os.O_RDONLY), 200)  # (past what sh and ls use)
        os.set_inheritable(inherited, True)  # one the parent got from its own parent
        proc = {"fork_exec" if how == "forked" else "start"}(["/bin/sh", "-c", {PROBE!r}])
        output = collect(proc, time.monotonic() + 5).decode()
        print(json.dumps([proc.pid, inherited, output, proc.poll()]))
    """)
    pid, inherited, output, status = json.loads(said)
    ids, fds, stdin, stderr, ignored = output.split("\n")[:5]
    session, group, cwd = ids.split()
    leader = session == group == str(pid)
    return leader, cwd, str(inherited) in fds.split(), stdin, stderr, ignored, status


def test_a_forked_read_starts_as_a_subprocess_read_does() -> None:
    forked, popen = described("forked"), described("subprocess")
    assert forked == popen
    leader, cwd, inherits, stdin, stderr, ignored, status = forked
    assert leader and cwd == "/" and not inherits and status == 0
    assert (stdin, stderr) == ("/dev/null", "/dev/null")
    assert int(str(ignored).split()[1], 16) & (1 << (SIGPIPE - 1)) == 0


def test_a_program_that_cannot_start_is_an_oserror_and_leaves_no_child() -> None:
    said = fresh("""
        import os
        from gpurig.read.forked import fork_exec
        try:
            fork_exec(["/no/such/program", "-c", "true"])
        except OSError as exc:
            print(exc.errno)
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            print("no child")
    """)
    assert said.split("\n")[:2] == ["2", "no child"]


def test_a_forked_read_is_found_on_path_bounded_and_stopped_with_its_group(tmp_path: Path) -> None:
    done = tmp_path / "done"
    said = fresh(f"""
        import time
        from gpurig.read.bounded import collect, stop
        from gpurig.read.forked import fork_exec
        print(collect(fork_exec(["echo", "found"]), time.monotonic() + 5))
        slow = fork_exec(["/bin/sh", "-c", "(sleep 3; touch {done}) & sleep 3"])
        print(collect(slow, time.monotonic() + 0.3))  # past its time: stopped, with its group
        waiting = fork_exec(["sleep", "2"])
        print(waiting.poll())
        stop(waiting)
        print(waiting.poll())
        time.sleep(3.2)
    """)
    assert said.split("\n")[:4] == ["b'found\\n'", "None", "None", "-15"]  # TERM, as Popen
    assert not done.exists(), "a child of the read outlived it"


def test_a_contract_forks_its_read_before_anything_it_loads_beside_it(tmp_path: Path) -> None:
    """Before the read forks, nothing is loaded that the contract could load while the read
    runs: subprocess (signal, locale, re, enum), typing, pathlib, json."""
    spec = tmp_path / "node.yaml"
    spec.write_text("engine: none\ncore_dumps: disabled\n")
    spy = f"""
        import sys
        print(sorted(sys.modules), file=sys.stderr)
        from gpurig.read import forked
        real = forked.fork_exec
        def fork_exec(argv, *rest):
            print(sorted(sys.modules), file=sys.stderr)
            return real(argv, *rest)
        forked.fork_exec = fork_exec
        sys.argv = ["gpurig", "drift", "--local", "--spec", {str(spec)!r}, "--mode", "npd"]
        from gpurig.cli.entry import main
        main()
    """
    env = {**os.environ, "GPURIG_RUNTIME_DIR": str(tmp_path / "run")}
    argv = [sys.executable, "-c", textwrap.dedent(spy)]
    runs = [  # the first keeps its command, the second forks it ahead
        subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True) for _ in range(2)
    ]
    said = [line for line in runs[1].stderr.splitlines() if line.startswith("[")]
    assert runs[1].returncode in (0, 1, 2) and len(said) == 2, runs[1].stderr
    at_start, at_fork = (set(ast.literal_eval(line)) for line in said)
    late = {"subprocess", "signal", "locale", "re", "enum", "typing", "pathlib", "json"}
    assert not late & at_start, "the interpreter loads them itself: nothing to show"
    assert sorted(late & at_fork) == []
    assert "gpurig.node.ahead" in at_fork


def test_the_health_checks_scontrol_is_forked_as_subprocess_would_run_it() -> None:
    """gpurig.node.slurm runs scontrol forked where nothing has loaded threading (the health
    check's start loads no subprocess): the same status, stdout and stderr as through
    subprocess, None past its time (its group stopped), and neither module loaded."""
    said = fresh("""
        import json, sys, time
        from gpurig.node import slurm
        slurm.TIMEOUT = 1
        script = "echo out; echo err >&2; exit 3"
        forked = slurm._run(["/bin/sh", "-c", script])
        started = time.monotonic()
        late = slurm._run(["/bin/sh", "-c", "sleep 30"])
        took = time.monotonic() - started
        slurm.bounds.MAX_OUTPUT_BYTES, slurm.root_tool = 100, lambda name: "/bin/sh"
        try:  # past the output bound: scontrol's error, as a timeout is
            slurm._scontrol("-c", "yes | head -c 1000")
        except slurm.SlurmError as exc:
            flood = str(exc)
        loaded = sorted(m for m in ("subprocess", "threading") if m in sys.modules)
        import threading  # now the subprocess path runs
        alike = slurm._run(["/bin/sh", "-c", script])
        print(json.dumps([forked, late, took < 5, flood, loaded, alike]))
    """)
    forked, late, bounded, flood, loaded, alike = json.loads(said)
    assert forked == alike == [3, "out\n", "err\n"]
    assert late == [None, "", ""] and bounded
    assert flood.startswith("scontrol -c: the host printed more than")
    assert loaded == []
