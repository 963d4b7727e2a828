"""gpurig's node contracts side by side with LBNL NHC 1.4.3 on the same kinds of checks, run on this
machine (a Prolog runs at every job start on every node).

    sudo .venv/bin/python benchmarks/node_contracts.py [--pairs 10] [--top 10]

Runs in pairs, interleaved, so both see the same load: NHC (benchmarks/nhc, vendored from its 1.4.3
release under its licence) with a configuration of matching checks (root filesystem mounted read-
write, disk and inode headroom, free memory, load, the core pattern), and `python -I -m gpurig
drift --local --spec SPEC --mode MODE` for npd, prolog and healthcheck (which, with no scontrol
here, says it cannot act) with a spec declaring core dumps and disk headroom (what those checks
judge). Then `gpurig up --local` with nothing to do (a spec whose converge has nothing to change
here, converged once first). All run twice over, each time with a HOME of their own for root: one
holding Debian's stock login files (base-files' dot.profile and dot.bashrc, where this machine has
them), one whose ~/.profile also sources a script doing what a conda or pyenv init does (starting a
Python that imports a few modules and prints the lines the profile evaluates, then a few lookups on
PATH): the login-shell read runs root's profile, so a heavy one would be timed at every run were
its answer not kept (gpurig.facts.gpurig_node.LoginShell keeps it for a few minutes, keyed by the
login files; a last row times npd with that answer removed first, as a run after it expired pays).
The contracts take root's HOME from the password database, whatever HOME their caller passes
(gpurig.root_env): the benchmark runs in a mount namespace of its own, with a fresh tmpfs holding a
copy of each round's HOME over root's home directory, so this machine's own profile is never run,
and up's converge writes only into the benchmark's HOME. What the contracts keep between runs (the
spec's parse, the read they start ahead: gpurig.spec.runtime) goes to a runtime directory of its
own; the warm-up run keeps it, as a node's first job does. Prints the medians of wall time, CPU
time (user + system, the process and its children) and the largest process's peak RSS, their ratios
to NHC, the read script's time per section, and the `-X importtime` entries with the largest
cumulative time. Every run's exit status must be the one its contract answered on that spec in a
run whose output was read (a status the contract gives, no traceback): a contract that crashed (at
import, say) is not timed as a fast one. Nothing outside its temporary directory is changed.
"""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NHC = ROOT / "benchmarks" / "nhc"
GOAL_RATIO = 1.0  # of NHC's wall time
GOAL_CPU_RATIO = 2.5
GOAL_MIB = 30
UP_GOAL_S = 0.3
NHC_CONF = """\
* || check_fs_mount_rw -f /
* || check_fs_free / 1%
* || check_fs_ifree / 1%
* || check_hw_physmem_free 1kB
* || check_ps_loadavg 1000
* || check_file_contents /proc/sys/kernel/core_pattern '*'
"""
SPEC = "engine: none\ncore_dumps: disabled\nchecks: {disk_free_min: 1g, inodes_free_min_pct: 1}\n"
UP_SPEC = "engine: none\nscope: user\n"
# The statuses each contract answers with (README: cluster operators; NHC: 0 with every check
# passing); which one depends on this machine's state, so each run must give what a reference
# run gave.
ANSWERS = {
    "NHC 1.4.3": {0},
    "gpurig npd": {0, 1, 2},
    "gpurig prolog": {0, 1},
    "gpurig healthcheck": {0, 1, 2},
    "gpurig up --local (no-op)": {0, 1},
    "gpurig npd, login re-asked": {0, 1, 2},
}


class NotAnAnswer(RuntimeError):
    """A run whose exit status is not its contract's answer on the spec: not timed."""


def answer(name: str, argv: list[str], env: dict[str, str]) -> int:
    """The status `name` answers with here, from a run whose output is read: one of its
    contract's (ANSWERS), no Python traceback, and for npd one line of at most 80 characters."""
    done = subprocess.run(argv, capture_output=True, text=True, env=env, start_new_session=True)
    said = done.stderr.strip().splitlines()[-1:] or done.stdout.strip().splitlines()[-1:] or [""]
    odd = "Traceback (most recent call last)" in done.stderr
    if name == "gpurig npd":
        lines = done.stdout.splitlines()
        odd = odd or len(lines) != 1 or len(lines[0]) > 80
    if odd or done.returncode not in ANSWERS[name]:
        raise NotAnAnswer(f"{name}: exit {done.returncode}, not its contract's answer: {said[0]}")
    return done.returncode


def measure(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float, int]:
    """Wall seconds, CPU seconds, the largest process's peak RSS (MiB) and the exit status of
    one run."""
    start = time.perf_counter()
    # Each in a session of its own, as slurmd and NPD start them (NHC, not a session leader,
    # re-executes itself through setsid(1), which forks: its parent's time is not its own).
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def gpurig(*args: str) -> list[str]:
    return [sys.executable, "-I", "-m", "gpurig", *args]


def section_times(spec: Path, mode: str, env: dict[str, str]) -> list[tuple[str, float]]:
    """Each section of the mode's read script run alone: (fact, seconds)."""
    sys.path.insert(0, str(ROOT))
    from gpurig.checks.judge import drift_reads
    from gpurig.node import modes as node_modes
    from gpurig.spec.inventory import load_spec_file

    host = load_spec_file(spec, "bench")
    times = []
    for cls, kwargs in drift_reads(host.spec, node_modes.mode(mode).scope):
        command = cls().command(**kwargs)
        start = time.perf_counter()
        subprocess.run(["/bin/sh", "-c", command], capture_output=True, cwd="/", env=env)
        times.append((cls.__name__, time.perf_counter() - start))
    return times


def import_top(argv: list[str], top: int, env: dict[str, str]) -> list[str]:
    """The `-X importtime` entries with the largest cumulative time."""
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], capture_output=True, text=True, cwd=ROOT, env=env
    )
    rows = []
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if line.startswith("import time:") and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].strip()))
    return [f"{us / 1000:8.1f} ms  {name}" for us, name in sorted(rows, reverse=True)[:top]]


STOCK_LOGIN = {".profile": "dot.profile", ".bashrc": "dot.bashrc"}
# What a conda or pyenv init costs a login shell: a Python started to print the shell code the
# profile evaluates (`eval "$(conda shell.bash hook)"`, `eval "$(pyenv init -)"`), then lookups
# on PATH.
HEAVY_INIT = """\
eval "$(python3 -c 'import json, subprocess, sysconfig, urllib.request
print("export GPURIG_BENCH_INIT=" + sysconfig.get_path("stdlib"))')"
for tool in conda pyenv module nvcc python3; do command -v "$tool" >/dev/null 2>&1; done
"""


def stock_home(path: Path, heavy: bool) -> str:
    """A HOME for root with the distribution's stock login files, and with `heavy` a profile
    that also sources HEAVY_INIT; what it holds, in words."""
    path.mkdir(mode=0o700)
    found = []
    for name, stock in STOCK_LOGIN.items():
        source = Path("/usr/share/base-files", stock)
        if source.is_file():
            (path / name).write_bytes(source.read_bytes())
            found.append(str(source))
    said = ", ".join(found) or "none (no base-files here): an empty HOME"
    if heavy:
        (path / ".init.sh").write_text(HEAVY_INIT)
        with (path / ".profile").open("a") as profile:
            profile.write('\n. "$HOME/.init.sh"\n')
        said += ", and a profile sourcing a conda/pyenv-like init"
    return said


def login_seconds(env: dict[str, str], runs: int = 5) -> float:
    """The median time of a login shell doing nothing, with this HOME."""
    times = [measure(["bash", "-l", "-c", "true"], env)[0] for _ in range(runs)]
    return statistics.median(times)


def compare(commands: dict[str, list[str]], env: dict[str, str], pairs: int) -> None:
    """Time each command in interleaved rounds after a warm-up; print medians and ratios."""
    for argv in commands.values():  # warm caches and bytecode; up converges its HOME
        measure(argv, env)
    answers = {name: answer(name, argv, env) for name, argv in commands.items()}
    runs: dict[str, list[tuple[float, float, float, int]]] = {name: [] for name in commands}
    for _ in range(pairs):
        for name, argv in commands.items():
            runs[name].append(measure(argv, env))
            if runs[name][-1][3] != answers[name]:
                raise NotAnAnswer(
                    f"{name}: exit {runs[name][-1][3]} in a timed run, "
                    f"{answers[name]} when its output was read"
                )
    medians = {
        name: tuple(statistics.median(r[i] for r in found) for i in range(3))
        for name, found in runs.items()
    }
    base = medians["NHC 1.4.3"]
    print(f"medians of {pairs} interleaved runs; goals: at most {GOAL_RATIO}x NHC's wall, "
          f"{GOAL_CPU_RATIO}x its CPU,")  # fmt: skip
    print(f"under {GOAL_MIB} MiB; up --local no-op under {UP_GOAL_S} s")
    print("exit statuses (each run's):", ", ".join(f"{n} {c}" for n, c in answers.items()))
    print(f"{'':<28}{'wall s':>8}{'CPU s':>8}{'MiB':>7}{'x wall':>8}{'x CPU':>7}{'x MiB':>7}")
    for name, (wall, cpu, mib) in medians.items():
        ratios = f"{wall / base[0]:>8.2f}{cpu / base[1]:>7.2f}{mib / base[2]:>7.2f}"
        print(f"{name:<28}{wall:>8.3f}{cpu:>8.3f}{mib:>7.1f}{ratios}")


def private_mounts() -> None:
    """Re-run this benchmark in a mount namespace of its own (once), so that what it mounts over
    root's home is seen by nothing else on the machine and goes with it. Refused where this
    Python or the checkout lies under root's home: the mount would hide them."""
    if os.environ.get("GPURIG_BENCH_UNSHARED") == "1":
        return
    roots = os.path.realpath(pwd.getpwuid(0).pw_dir)
    for path in (os.path.realpath(sys.executable), sys.base_prefix, sys.prefix, str(ROOT)):
        if os.path.commonpath([os.path.realpath(path), roots]) == roots:
            raise SystemExit(f"{path} lies under root's home ({roots}), which the benchmark "
                             "replaces for its contracts: run it from elsewhere")  # fmt: skip
    env = {**os.environ, "GPURIG_BENCH_UNSHARED": "1"}
    unshare = ["unshare", "--mount", "--propagation", "private"]
    os.execvpe(unshare[0], [*unshare, sys.executable, *sys.argv], env)


def as_roots_home(home: Path) -> None:
    """A copy of `home`'s files as root's home directory: a fresh tmpfs over it in this
    benchmark's own mount namespace (nothing is bound, so nothing of the machine's lies under
    the temporary directory its clean-up removes)."""
    roots = pwd.getpwuid(0).pw_dir
    subprocess.run(["umount", roots], capture_output=True)  # the round before's, if any
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0700", "tmpfs", roots], check=True)
    for entry in home.iterdir():
        shutil.copy2(entry, Path(roots, entry.name), follow_symlinks=False)


def main() -> None:
    private_mounts()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        conf, spec, up_spec = Path(tmp, "nhc.conf"), Path(tmp, "node.yaml"), Path(tmp, "up.yaml")
        conf.write_text(NHC_CONF)
        spec.write_text(SPEC)
        up_spec.write_text(UP_SPEC)
        nhc = ["bash", str(NHC / "nhc"), "-D", str(NHC), "-c", str(conf), "-l", "/dev/null"]
        nhc += ["-t", "10"]
        commands = {
            "NHC 1.4.3": nhc,
            "gpurig npd": gpurig("drift", "--local", "--spec", str(spec), "--mode", "npd"),
            "gpurig prolog": gpurig("drift", "--local", "--spec", str(spec), "--mode", "prolog"),
            "gpurig healthcheck": gpurig(
                "drift", "--local", "--spec", str(spec), "--mode", "healthcheck"
            ),
            "gpurig up --local (no-op)": gpurig("up", "--local", "--spec", str(up_spec)),
        }
        for heavy in (False, True):
            home = Path(tmp, "heavy-home" if heavy else "home")
            login = stock_home(home, heavy)
            as_roots_home(home)
            env = {**os.environ, "INCDIR": str(NHC / "scripts"), "NHC_RM": "none"}
            env["HOME"] = pwd.getpwuid(0).pw_dir  # home's copy: what the contracts take
            # What a contract keeps between runs, apart for each HOME (as two nodes would).
            run = Path(tmp, "run-heavy" if heavy else "run")
            env["GPURIG_RUNTIME_DIR"] = str(run)
            # The run that asks the login shell again (once the kept answer is older than its
            # bound, or a login file changed): the kept answer removed first.
            commands["gpurig npd, login re-asked"] = [
                "/bin/sh", "-c", 'rm -f -- "$0" && exec "$@"', str(run / "login"),
                *commands["gpurig npd"],
            ]  # fmt: skip
            print(f"\nroot's login files: {login}; a login shell: "
                  f"{login_seconds(env) * 1000:.0f} ms")  # fmt: skip
            compare(commands, env, args.pairs)
        for mode in ("npd", "prolog"):
            print(f"\nread script sections ({mode}), each run alone:")
            for fact, seconds in section_times(spec, mode, env):
                print(f"  {seconds * 1000:8.1f} ms  {fact}")
        print("\nlargest imports (cumulative), gpurig npd:")
        for line in import_top(commands["gpurig npd"], args.top, env):
            print(f"  {line}")


if __name__ == "__main__":
    main()
