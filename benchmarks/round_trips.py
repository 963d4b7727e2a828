"""Remote commands per host for `gpurig drift` and a no-op converge of full hosts (Docker and
Podman, systemd, a real engine) carrying the full spec: engine, insecure registry, toolkit from
the sandbox's apt repository, packages, core dumps, a digest-pinned training container, a
checkout, two secrets and cleanup. DESIGN's budget: drift 1, no-op converge at most 3.

    sudo .venv/bin/python benchmarks/round_trips.py [--repeat 3]

Needs root: it brings up its own sandbox (named $GPURIG_BENCH_SANDBOX or `rtt`, two full hosts)
and takes it down at the end. Sessions are counted by an /etc/ssh/sshrc that logs each SSH
session (a command or a file transfer) during one untimed run; times are medians at RTT 0.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.drift_bench import COUNT_OFF, COUNT_ON, COUNT_READ
from gpurig.sandbox import aptrepo, manager
from gpurig.sandbox.services import url
from gpurig.sandbox.state import load, locate

ROOT = Path(__file__).resolve().parent.parent
HOSTS = {"full-1": "docker", "full-2": "podman"}


def sh(*argv: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})  # fmt: skip
    if check and proc.returncode != 0:
        raise SystemExit(
            f"{' '.join(argv[:4])}... failed:\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}"
        )
    return proc.stdout


def repository(top: Path, scratch: Path) -> tuple[str, str]:
    """A one-commit repository on the sandbox's git daemon: its URL and commit."""
    bare, work = top / "git" / "repos" / "rtt.git", scratch / "rtt"
    sh("git", "init", "-q", "--bare", "-b", "main", str(bare))
    sh("git", "init", "-q", "-b", "main", str(work))
    (work / "train.sh").write_text("#!/bin/sh\necho training\n")
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    sh("git", "-C", str(work), "add", "-A")
    sh("git", "-C", str(work), *ident, "commit", "-qm", "bench")
    sh("git", "-C", str(work), "push", "-q", str(bare), "HEAD:main")
    state = load(manager.Paths(top).state)
    return f"{url(state, 'git')}/rtt.git", sh("git", "-C", str(work), "rev-parse", "HEAD").strip()


def full_spec(top: Path, engine: str, checkout: tuple[str, str], secret: Path) -> dict:
    state = load(manager.Paths(top).state)
    registry, apt = url(state, "registry"), url(state, "aptrepo")
    repo, commit = checkout
    spec = {
        "engine": engine,
        "gpu": "auto",  # the sandbox says absent; auto converges the toolkit without a GPU
        "insecure_registries": [registry],
        "nvidia_toolkit": aptrepo.toolkit_spec(top, apt, aptrepo.VERSIONS[0]),
        "packages": ["curl"],
        "containers": {"train": {
            "image": state.images["train"], "shm_size": "8g", "user": "root",
            "network": "host", "command": ["sleep", "infinity"],
            "ulimits": {"nofile": "1024:20000", "nproc": "4096:4096"},
        }},
        "repos": {"/srv/rtt": {"url": repo, "ref": commit}},
        "secrets": [{"src": str(secret), "dest": "/root/.rtt-a"},
                    {"src": str(secret), "dest": "/root/.rtt-b", "mode": "0640"}],
        "cleanup": {"ray_sessions": True, "core_files": True},
    }  # fmt: skip
    if engine == "podman":
        spec["podman_socket"] = True
    return spec


def timed(argv: list[str], env: dict[str, str], check: bool = True) -> float:
    began = time.monotonic()
    sh(*argv, env=env, check=check)
    return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    name, top = locate(os.environ.get("GPURIG_BENCH_SANDBOX", "rtt"), None)
    manager.up(top, name, 0, len(HOSTS), log=lambda _: None)
    paths = manager.Paths(top)
    ssh = ["ssh", "-F", str(paths.ssh_config)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            scratch = Path(tmp)
            inventory = yaml.safe_load(paths.inventory.read_text())
            checkout, secret = repository(top, scratch), scratch / "secret"
            secret.write_text("token-0123456789\n")
            for host, engine in HOSTS.items():
                inventory["hosts"][host]["spec"] = full_spec(top, engine, checkout, secret)
            path = scratch / "inventory.yaml"
            path.write_text(yaml.safe_dump(inventory))
            env = {"GPURIG_INVENTORY": str(path)}
            # The sandbox holds only these hosts: the converge takes the whole inventory.
            converge = [sys.executable, "-m", "pyinfra", "-y", "inventory.py",
                        "deploys/gpu_host.py"]  # fmt: skip
            drift = [sys.executable, "-m", "gpurig", "drift", str(path)]
            timed(converge, env)  # the first converge installs everything
            assert "0 with drift" in sh(*drift, env=env, check=False), "not converged"
            rows = []
            for label, argv in (("gpurig drift", drift), ("no-op converge", converge)):
                for host in HOSTS:
                    sh(*ssh, host, COUNT_ON)
                timed(argv, env, check=label != "gpurig drift")
                # sshd logs the reading session itself before it runs: one less.
                counts = [int(sh(*ssh, host, COUNT_READ)) - 1 for host in HOSTS]
                for host in HOSTS:
                    sh(*ssh, host, COUNT_OFF)
                times = [
                    timed(argv, env, check=label != "gpurig drift") for _ in range(args.repeat)
                ]
                rows.append((label, counts, statistics.median(times)))
    finally:
        manager.down(top, log=lambda _: None)
    print(
        "| | sessions on the Docker host | sessions on the Podman host | median seconds (2 hosts) |"
    )
    print("| --- | --- | --- | --- |")
    for label, counts, seconds in rows:
        print(f"| {label} | {counts[0]} | {counts[1]} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
