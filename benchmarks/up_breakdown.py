"""Where `gpurig up --local` spends a job's first second: run it where the job runs, as the job's
user, with the python gpurig is installed in (a SLURM job: `srun -w NODE PYTHON -I
benchmarks/up_breakdown.py ~/node.yaml`), after one `gpurig up` has converged the node.

    python -I benchmarks/up_breakdown.py SPEC [--runs 5]

Prints, as medians over the runs: the interpreter's start, loading the spec (its parse kept in
the runtime directory after the first run), loading the judge, the read (the one command
`up` runs), judging it, and each section of the read run alone (the engine's socket answer is
UserPodman's or EngineState's), then whole `gpurig up --local` runs beside them. Changes
nothing: `up` itself is run only on a node it finds converged (exit 0, nothing converged).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def phases(spec: str) -> dict[str, float]:
    """One `up`'s phases in a fresh interpreter: seconds each, as JSON lines on stdout."""
    code = f"""
import time; t0 = time.perf_counter()
from gpurig.node.command import this_node
from gpurig.spec.inventory import load_spec_file
host = load_spec_file({spec!r}, this_node()); t1 = time.perf_counter()
from gpurig.checks.judge import report
from gpurig.node.read import read_local
t2 = time.perf_counter()
probed = read_local(host); t3 = time.perf_counter()
report(probed); t4 = time.perf_counter()
print(f"spec {{t1 - t0}}\\njudge loaded {{t2 - t1}}\\nread {{t3 - t2}}\\njudged {{t4 - t3}}")
"""
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr)
    return {k: float(v) for k, _, v in (line.rpartition(" ") for line in done.stdout.splitlines())}


def sections(spec: str) -> dict[str, float]:
    """Each section of up's read run alone: seconds."""
    from gpurig.checks.judge import drift_reads
    from gpurig.node.command import this_node
    from gpurig.spec.inventory import load_spec_file
    from gpurig.spec.model import normalise

    host = load_spec_file(spec, this_node())
    found = {}
    for cls, kwargs in drift_reads(normalise(host.spec)):
        start = time.perf_counter()
        subprocess.run(["/bin/sh", "-c", cls().command(**kwargs)], capture_output=True, cwd="/")
        found[cls.__name__] = found.get(cls.__name__, 0.0) + time.perf_counter() - start
    return found


def timed(argv: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, cwd="/")
    return time.perf_counter() - start, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    spec = os.path.abspath(os.path.expanduser(args.spec))
    gpurig = [sys.executable, "-I", "-m", "gpurig", "up", "--local", "--spec", spec]
    if timed(gpurig)[1] != 0:
        raise SystemExit("gpurig up --local failed here: converge the node first")
    runs: dict[str, list[float]] = {}
    for _ in range(args.runs):
        runs.setdefault("interpreter start", []).append(timed([sys.executable, "-I", "-c", ""])[0])
        for name, seconds in phases(spec).items():
            runs.setdefault(name, []).append(seconds)
        wall, code = timed(gpurig)
        if code != 0:
            raise SystemExit(f"gpurig up --local exited {code} in a timed run")
        runs.setdefault("gpurig up --local (whole, read ahead)", []).append(wall)
    print(f"medians of {args.runs} runs, seconds:")
    for name, seconds in runs.items():
        print(f"  {statistics.median(seconds):7.3f}  {name}")
    print("the read's sections, each run alone:")
    for name, seconds in sorted(sections(spec).items(), key=lambda item: -item[1]):
        print(f"  {seconds:7.3f}  {name}")


if __name__ == "__main__":
    main()
