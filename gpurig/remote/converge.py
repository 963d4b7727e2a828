"""Run a pyinfra converge and read its JSON results (not its prose)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import gpurig
from gpurig.spec.hostkeys import changed_message, mismatched_hosts
from gpurig.spec.inventory import InventoryError, load_inventory

# Where `inventory.py` and `deploys/` are: the checkout, or the wheel's copy inside gpurig.
DEPLOY_ROOT = Path(gpurig.DEPLOY_ROOT)


@dataclass
class ConvergeResult:
    """What one `pyinfra -y --json inventory.py deploys/gpu_host.py` did."""

    returncode: int
    changed: dict[str, list[str]] = field(default_factory=dict)  # operation -> hosts
    errors: dict[str, list[str]] = field(default_factory=dict)
    failed_hosts: list[str] = field(default_factory=list)
    stderr: str = ""
    stdout: str = ""  # pyinfra's --json document, kept for the log
    messages: list[str] = field(default_factory=list)  # what gpurig makes of a failure

    @property
    def change_count(self) -> int:
        return sum(len(hosts) for hosts in self.changed.values())


def parse_results(stdout: str) -> tuple[dict[str, list[str]], dict[str, list[str]], list[str]]:
    """Changed and failed operations per host from pyinfra's `--json` run output."""
    results = json.loads(stdout)["results"] or {}
    changed = {op["name"]: op["success"] for op in results["operations"] if op["success"]}
    errors = {op["name"]: op["error"] for op in results["operations"] if op["error"]}
    return changed, errors, results["failed_hosts"]


DEPLOY = "deploys/gpu_host.py"


def pyinfra_argv(
    deploy: str = DEPLOY,
    limit: Sequence[str] = (),
    data: Sequence[str] = (),
    flags: Sequence[str] = ("-y",),
) -> list[str]:
    """pyinfra's command line for the deploy tree's `inventory.py` and `deploy`, by their full
    paths (a checkout's, or the installed wheel's copy): `pyinfra inventory.py deploy` as run
    in a checkout. `data`: `KEY=VALUE` words for `--data`."""
    argv = [sys.executable, "-m", "pyinfra", *flags]
    for name in limit:
        argv += ["--limit", name]
    for word in data:
        argv += ["--data", word]
    return [*argv, str(DEPLOY_ROOT / "inventory.py"), str(DEPLOY_ROOT / deploy)]


def inventory_env(inventories: Sequence[Path | str]) -> dict[str, str]:
    """The environment that points `inventory.py` at `inventories` (their full paths)."""
    paths = os.pathsep.join(os.path.abspath(p) for p in inventories)
    return {**os.environ, "GPURIG_INVENTORY": paths}


def converge(
    inventories: Sequence[Path],
    deploy: str = DEPLOY,
    limit: Sequence[str] = (),
    data: dict[str, str] | None = None,
) -> ConvergeResult:
    """Converge the hosts of `inventories` (optionally only `limit`) with pyinfra's CLI."""
    words = [f"{key}={value}" for key, value in (data or {}).items()]
    argv = pyinfra_argv(deploy, limit, words, flags=("-y", "--json"))
    proc = subprocess.run(argv, cwd=DEPLOY_ROOT, env=inventory_env(inventories),
                          capture_output=True, text=True)  # fmt: skip
    result = ConvergeResult(proc.returncode, stderr=proc.stderr, stdout=proc.stdout)
    if proc.stdout.strip():
        result.changed, result.errors, result.failed_hosts = parse_results(proc.stdout)
    result.messages = key_changed_messages(inventories, mismatched_hosts(proc.stderr))
    return result


def key_changed_messages(
    inventories: Sequence[Path], refused: Mapping[str, str | None]
) -> list[str]:
    """The changed-host-key message for each refused host (name -> the login node whose key
    it was, or None for its own), naming the file that records it."""
    if not refused:
        return []
    try:
        sources = {h.name: h.source for h in load_inventory(inventories).hosts}
    except InventoryError:  # pyinfra connected, so the files were valid a moment ago
        sources = {}
    joined = os.pathsep.join(str(p) for p in inventories)
    return [
        changed_message(name, sources.get(name, joined), jump) for name, jump in refused.items()
    ]
