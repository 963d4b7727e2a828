"""Time `gpurig --version`, `gpurig validate` (50 hosts), `gpurig compat` and what `gpurig drift`
imports from a cold process.

    .venv/bin/python benchmarks/startup_bench.py [--repeat 9] [--top 12]

Two bytecode states, neither touching the checkout or the virtual environment (each keeps its
bytecode under a throwaway PYTHONPYCACHEPREFIX):
- compiled: bytecode for everything, written by one warm-up run (an installed, used tool);
- source: the interpreter's standard library compiled, gpurig and its dependencies compiled
  from source on every run (a plain `uv sync`, whose first run or read-only install pays this).
Prints the median wall time and CPU time (user + system, steadier than wall time on a busy
machine) of each, the interpreter's own start-up for scale, and the `python -X importtime`
entries with the largest cumulative time for each command.

Drift's row is its start-up before the first connection: the console script with gevent patched
in (`gpurig drift --help` stops there), then the modules `gpurig.cli.main.drift` imports. Beside it,
the part no gpurig module chooses: gevent patched and pyinfra's API (with paramiko) alone.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import site
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
GPURIG = Path(sys.executable).with_name("gpurig")
EXAMPLE = ROOT / "inventories" / "examples" / "example.yaml"
GOAL_S = 0.3
DRIFT_GOAL_S = 0.4
# What `gpurig drift` has imported when it starts reading hosts (see gpurig.cli.main.drift).
DRIFT_IMPORTS = """
import sys
sys.argv = ["gpurig", "drift", "--help"]
from gpurig.cli import entry
entry.done = lambda status: None  # a connecting command's exit, skipped: this process goes on
try:
    entry.main()
except SystemExit:
    pass
import gpurig.remote.drift, gpurig.remote.pyinfra_inventory
import gpurig.report.render, gpurig.spec.inventory
"""
CONNECTING_FLOOR = "from gevent import monkey; monkey.patch_all(); import pyinfra.api"


def fleet_inventory(out: Path, size: int = 50) -> Path:
    """The example fleet's defaults and groups with `size` hosts cycling through its hosts."""
    doc = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    examples = list(doc["hosts"].items())
    hosts = {}
    for i in range(size):
        name, entry = examples[i % len(examples)]
        hosts[f"{name}-{i:03d}"] = {**entry, "address": f"203.0.113.{i + 1}"}
    out.write_text(yaml.safe_dump({**doc, "hosts": hosts}, sort_keys=False), encoding="utf-8")
    return out


def cpu_seconds() -> float:
    """User + system time of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall and CPU seconds of one run, and the run."""
    began, cpu = time.monotonic(), cpu_seconds()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    return time.monotonic() - began, cpu_seconds() - cpu, proc


def checked(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    wall, cpu, proc = run(argv, env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return wall, cpu


def bytecode_envs(tmp: Path, warm: list[str]) -> dict[str, dict[str, str]]:
    """Environments for the two bytecode states, each with its own pycache prefix."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    compiled = {**base, "PYTHONPYCACHEPREFIX": str(tmp / "pyc-all")}
    checked(warm, compiled)  # writes bytecode for everything this command imports
    source = {**base, "PYTHONPYCACHEPREFIX": str(tmp / "pyc-stdlib")}
    checked(warm, source)
    # Keep only the standard library's bytecode: the prefix mirrors absolute source paths.
    for tree in [ROOT, *map(Path, site.getsitepackages())]:
        shutil.rmtree(tmp / "pyc-stdlib" / tree.relative_to(tree.anchor), ignore_errors=True)
    return {"compiled": compiled, "source": {**source, "PYTHONDONTWRITEBYTECODE": "1"}}


def import_offenders(argv: list[str], env: dict[str, str], top: int) -> list[str]:
    """The `top` imports with the largest cumulative time, indented as importtime nests them."""
    script = argv[1:] if argv[0] == sys.executable else argv  # `python -c CODE` or a script
    *_, proc = run([sys.executable, "-X", "importtime", *script], env)
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        rows.append((int(cumulative), name.rstrip()))
    rows.sort(key=lambda row: row[0], reverse=True)
    return [f"{us / 1000:8.1f} ms {name}" for us, name in rows[:top]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--top", type=int, default=12, help="importtime rows per command")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        inventory = fleet_inventory(tmp / "fleet.yaml")
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "gpurig --version": [str(GPURIG), "--version"],
            "gpurig validate (50 hosts)": [str(GPURIG), "validate", str(inventory)],
            "gpurig compat": [str(GPURIG), "compat", "--driver", "570.124.04", "--cuda", "12.8"],
            "gpurig drift's imports": [sys.executable, "-c", DRIFT_IMPORTS],
            "gevent + pyinfra.api only": [sys.executable, "-c", CONNECTING_FLOOR],
        }
        envs = bytecode_envs(tmp, commands["gpurig validate (50 hosts)"])
        for argv in commands.values():
            checked(argv, envs["compiled"])  # the other commands' imports get bytecode too
        print(
            f"median seconds of {args.repeat} runs; goal: gpurig commands under {GOAL_S} s, "
            f"drift's imports under {DRIFT_GOAL_S} s of CPU"
        )
        print(f"{'':<28} {'compiled':>19} {'source':>19}")
        print(f"{'command':<28} " + f"{'wall':>9} {'cpu':>9} " * 2)
        for label, argv in commands.items():
            cells = []
            for env in envs.values():
                walls, cpus = zip(*(checked(argv, env) for _ in range(args.repeat)), strict=True)
                cells += [statistics.median(walls), statistics.median(cpus)]
            print(f"{label:<28} " + " ".join(f"{c:>9.3f}" for c in cells))
        for label, argv in list(commands.items())[1:-1]:
            print(f"\n{label}: python -X importtime, largest cumulative (compiled)")
            # The console script is a Python file: run it under -X importtime directly.
            print("\n".join(import_offenders(argv, envs["compiled"], args.top)))


if __name__ == "__main__":
    main()
