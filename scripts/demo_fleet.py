"""The demo's fleet, for scripts/demo.sh (run from the repository root, PYTHONPATH=.).

    python scripts/demo_fleet.py prepare NAME   # after `gpurig sandbox up --name NAME`
    python scripts/demo_fleet.py summary RESULTS.json

`prepare` pushes a small training repository (a CRLF script, a pip lockfile with hashes and
its wheels) to the sandbox's git server, writes a secret and the demo inventory (a Docker
host and a Podman host running the README's training container), and prints shell
assignments for the script. `summary` prints what a converge changed, per host and concern,
from pyinfra's `--json` results, instead of pyinfra's per-operation output.
"""

from __future__ import annotations

import resource
import secrets
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

from gpurig.remote.converge import parse_results
from gpurig.sandbox.aptrepo import toolkit_spec
from gpurig.sandbox.manager import Paths
from gpurig.sandbox.services import url
from gpurig.sandbox.state import load, locate
from tests.lockproject import make_project

CODE = "/srv/train"
HOSTS = {"full-1": {"engine": "docker"}, "full-2": {"engine": "podman", "podman_socket": True}}
GIT_ID = ["-c", "user.name=demo", "-c", "user.email=demo@sandbox.invalid"]


def _git(work: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(work), *GIT_ID, *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def push_repository(top: Path) -> str:
    """The `train` repository on the sandbox's git server; returns its commit."""
    bare, work = top / "git" / "repos" / "train.git", top / "demo" / "train"
    if not bare.exists():
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    if not work.exists():
        subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
        _git(work, "config", "core.autocrlf", "false")
        _git(work, "remote", "add", "origin", str(bare))
        # Written on Windows: the checkout on the hosts must still run it.
        (work / "train.sh").write_bytes(b"#!/bin/sh\r\nexec python3 train.py\r\n")
        (work / "train.py").write_text("print('training')\n")
        make_project(work, {"alpha": "1.0"}, {"alpha": ["1.0", "1.1"]}, f"{CODE}/wheels")
        _git(work, "add", "-A")
        _git(work, "commit", "-qm", "train: first version, locked")
        _git(work, "push", "-q", "origin", "HEAD:main")
    return _git(work, "rev-parse", "HEAD")


def train_container(image: str) -> dict:
    """The README's training container. The hosts inherit this machine's hard limits, which
    engine defaults can exceed: the ulimits stay within them."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return {
        "image": image,
        "shm_size": "8g",
        "user": "root",
        "network": "host",
        "mounts": [f"{CODE}:/workspace/train:ro"],
        "command": ["sleep", "infinity"],
        "ulimits": {"nofile": f"1024:{nofile}", "nproc": "4096:4096"},
        "omp_num_threads": "auto",
    }


def prepare(name: str) -> None:
    _, top = locate(name, None)
    paths, state = Paths(top), load(Paths(top).state)
    if not state.full():
        sys.exit(f"demo: sandbox {name!r} has no full hosts: run `gpurig sandbox up` first")
    commit = push_repository(top)
    token = top / "demo" / "hf_token"
    if not token.exists():
        token.write_text(secrets.token_hex(20) + "\n")
        token.chmod(0o600)
    apt = url(state, "aptrepo")
    inventory = yaml.safe_load(paths.inventory.read_text())
    inventory["groups"]["train"] = {
        "spec": {
            "gpu": "auto",  # no GPU here: the toolkit is installed, CDI is not generated
            "insecure_registries": [url(state, "registry")],
            "nvidia_toolkit": toolkit_spec(top, apt, "1.17.8-1"),
            "packages": ["python3-venv"],
            # The sandbox's hosts share this machine's disk: a headroom any machine has.
            "checks": {"disk_free_min": "2g"},
            "repos": {
                CODE: {
                    "url": f"{url(state, 'git')}/train.git",
                    "ref": commit,
                    "line_endings": "lf",
                    "python": {"manager": "pip", "lockfile": "requirements.txt"},
                }
            },
            "secrets": [{"src": str(token), "dest": "/root/.cache/huggingface/token"}],
            "containers": {"train": train_container(state.images["train"])},
        }
    }
    inventory["hosts"] = {
        host: {**inventory["hosts"][host], "groups": ["full", "train"], "spec": spec}
        for host, spec in HOSTS.items()
    }
    out = top / "demo" / "inventory.yaml"
    text = yaml.safe_dump(inventory, sort_keys=False)
    out.write_text(f"# Written by scripts/demo_fleet.py\n{text}")
    docker, podman = HOSTS
    values = {
        "DEMO_DIR": top / "demo",
        "INVENTORY": out,
        "SSH_CONFIG": paths.ssh_config,
        "IMAGE": state.images["train"],
        "DOCKER_HOST_NAME": docker,
        "PODMAN_HOST_NAME": podman,
    }
    print("\n".join(f"{key}={shlex.quote(str(value))}" for key, value in values.items()))


def summary(results: Path) -> None:
    """One line per host: how many operations changed, by concern; then any failure."""
    text = results.read_text() if results.exists() else ""
    if not text.strip():
        print("  no results (pyinfra stopped before running operations)")
        return
    changed, errors, failed = parse_results(text)
    per_host: dict[str, Counter[str]] = {}
    for operation, hosts in changed.items():
        for host in hosts:
            per_host.setdefault(host, Counter())[operation.split(" | ")[0]] += 1
    for host in sorted(per_host):
        counts = per_host[host]
        detail = ", ".join(f"{concern} {n}" for concern, n in counts.items())
        print(f"  {host}: {sum(counts.values())} changed ({detail})")
    if not per_host:
        print("  0 changes")
    for operation, hosts in errors.items():
        print(f"  FAILED on {', '.join(hosts)}: {operation}")
    if failed and not errors:
        print(f"  FAILED: {', '.join(failed)}")


if __name__ == "__main__":
    command, arg = sys.argv[1:3]
    prepare(arg) if command == "prepare" else summary(Path(arg))
