"""Time `gpurig drift` against the same checks as one-command pyinfra facts, as an Ansible
playbook (forks = hosts), and a bare parallel `ssh host true`, on 10, 50 and 100 sandbox hosts.

    uv sync --frozen --group bench
    sudo .venv/bin/python benchmarks/drift_bench.py [--sizes 10,50,100] [--repeat 3]

Prints a table (median seconds) and ratios from the same run. Needs root (it brings up its own
sandbox, named $GPURIG_BENCH_SANDBOX or `bench`, beside any other, and takes it down at the
end).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from benchmarks.checks import CHECKS
from gpurig.sandbox import manager
from gpurig.sandbox.state import locate

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
METHODS = ["gpurig drift", "pyinfra, one fact per check", "ansible-playbook", "ssh host true"]
PER_FACT_DEPLOY = "benchmarks/per_fact_deploy.py"
ANSIBLE_ENV = {
    "ANSIBLE_HOST_KEY_CHECKING": "True",
    "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3",
}


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    began = time.monotonic()
    proc = subprocess.run(
        argv, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True
    )
    elapsed = time.monotonic() - began
    if proc.returncode not in (0, 1):  # drift's 1 means findings, which is still a full run
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return elapsed


def ssh_true(names: list[str], ssh_config: Path) -> float:
    def one(name: str) -> None:
        subprocess.run(["ssh", "-F", str(ssh_config), name, "true"], check=True)

    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        list(pool.map(one, names))
    return time.monotonic() - began


def write_subset(paths: manager.Paths, names: list[str], out: Path) -> Path:
    inventory = yaml.safe_load(paths.inventory.read_text())
    inventory["hosts"] = {n: h for n, h in inventory["hosts"].items() if n in names}
    out.write_text(yaml.safe_dump(inventory))
    return out


def ansible_inventory(paths: manager.Paths, names: list[str], out: Path) -> Path:
    hosts = yaml.safe_load(paths.inventory.read_text())["hosts"]
    ssh_args = f"-o UserKnownHostsFile={paths.known_hosts} -o StrictHostKeyChecking=yes"
    lines = ["[fleet]"] + [
        f"{n} ansible_host={hosts[n]['address']} ansible_user=root "
        f"ansible_ssh_private_key_file={paths.client_key} ansible_ssh_common_args='{ssh_args}'"
        for n in names
    ]
    out.write_text("\n".join(lines) + "\n")
    return out


def playbook(out: Path) -> Path:
    play = [
        {
            "hosts": "fleet",
            "gather_facts": False,
            "tasks": [{"shell": check, "changed_when": False} for check in CHECKS],
        }
    ]
    out.write_text(yaml.safe_dump(play))
    return out


def time_size(
    size: int, paths: manager.Paths, book: Path, tmp: Path, args: argparse.Namespace
) -> dict[str, float]:
    """Median seconds of each method on the first `size` fleet hosts."""
    names = [f"fleet-{i:03d}" for i in range(1, size + 1)]
    inv = write_subset(paths, names, tmp / f"inv-{size}.yaml")
    ini = ansible_inventory(paths, names, tmp / f"hosts-{size}.ini")
    methods = {
        "gpurig drift": lambda: timed([str(BIN / "gpurig"), "drift", str(inv), "--format", "json"]),
        "pyinfra, one fact per check": lambda: timed(
            [str(BIN / "pyinfra"), "-y", "inventory.py", PER_FACT_DEPLOY],
            env={"GPURIG_INVENTORY": str(inv)},
        ),
        "ansible-playbook": lambda: timed(
            [str(BIN / "ansible-playbook"), "-i", str(ini), "-f", str(size), str(book)],
            env=ANSIBLE_ENV,
        ),
        "ssh host true": lambda: ssh_true(names, paths.ssh_config),
    }
    runs: dict[str, list[float]] = {name: [] for name in methods}
    for round_ in range(args.repeat):
        for name, method in methods.items():
            # Ansible takes minutes at 100 hosts: it runs once unless asked for more.
            if name != "ansible-playbook" or round_ < args.ansible_repeat:
                runs[name].append(method())
    return {name: statistics.median(times) for name, times in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,50,100")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ansible-repeat", type=int, default=1)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    name, top = locate(os.environ.get("GPURIG_BENCH_SANDBOX", "bench"), None)
    paths = manager.Paths(top)
    manager.up(top, name, max(sizes), 0, log=lambda _: None)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            book = playbook(Path(tmp, "checks.yml"))
            for size in sizes:
                rows.append((size, time_size(size, paths, book, Path(tmp), args)))
    finally:
        manager.down(top, log=lambda _: None)
    print(
        f"median seconds of {args.repeat} runs ({args.ansible_repeat} for Ansible); "
        f"{len(CHECKS)} checks per host"
    )
    header = ["hosts", *METHODS, "ansible/gpurig", "gpurig/ssh"]
    print("  ".join(f"{h:>14}" for h in header))
    for size, t in rows:
        cells = [str(size), *(f"{t[m]:.2f}" for m in METHODS)]
        cells += [f"{t['ansible-playbook'] / t['gpurig drift']:.1f}x"]
        cells += [f"{t['gpurig drift'] / t['ssh host true']:.2f}x"]
        print("  ".join(f"{c:>14}" for c in cells))


if __name__ == "__main__":
    main()
