"""The container engine (`engine`): packages, the service or socket, Docker's daemon.json keys
(every other key kept; one write and one restart for all of them), Podman's registries and
DOCKER_HOST files."""

from __future__ import annotations

import json
import shlex
from typing import Any

from pyinfra.api import deploy, operation

from deploys.changes import start
from deploys.core_dumps import write
from deploys.packages import install
from deploys.snapshot import read
from deploys.writes import put
from gpurig.plans import engine as plan
from gpurig.plans.engine import DAEMON_JSON

DAEMON_KEYS = ("engine.insecure_registries", "toolkit.runtime", "engine.daemon_json")


def start_unit(unit: str, restart: bool = False) -> str:
    """Start (or restart) a unit; `reset-failed` first, so a unit that hit systemd's start
    limit after earlier restarts is started again instead of refused."""
    u = shlex.quote(unit)
    verb = "restart" if restart else "start"
    return f"systemctl reset-failed {u} 2>/dev/null; systemctl enable {u} && systemctl {verb} {u}"


def write_daemon_json(changes: list) -> list:
    """One write and one docker restart for every daemon.json key that changed; a restart
    stops every container without a restart policy, so it happens only on a real change."""
    daemon = [c for c in changes if c.id in DAEMON_KEYS]
    if not daemon:
        return []
    content = json.dumps(daemon[0].data["daemon_json"], indent=2, sort_keys=True) + "\n"
    return [*put(content.encode(), DAEMON_JSON, "644"), start_unit("docker", restart=True)]


@operation()
def container_engine(spec: dict[str, Any]):
    """Install and start the declared engine, with gpurig's files."""
    changes = [c for c in plan.plan(spec, read) if c.id not in DAEMON_KEYS]
    if not start(changes, f"{spec['engine']} installed, configured and running"):
        return
    for change in changes:
        if change.id == "packages.missing":
            yield install(change)
        elif change.id in ("engine.service", "engine.socket"):
            yield start_unit(change.data["unit"])
        elif change.id in ("engine.registries", "engine.docker_host"):
            yield from write(change)


@operation()
def docker_daemon_json(spec: dict[str, Any]):
    """gpurig's keys in daemon.json (every other key kept), one write and one restart."""
    changes = [c for c in plan.plan(spec, read) if c.id in DAEMON_KEYS or c.refused]
    if start(changes, f"{DAEMON_JSON} has gpurig's keys"):
        yield from write_daemon_json(changes)


@deploy("Container engine")
def engine(spec: dict[str, Any]) -> None:
    if spec["engine"] != "none":
        container_engine(name=f"Install and start {spec['engine']}", spec=spec)
    if spec["engine"] == "docker":
        docker_daemon_json(name=f"Configure {DAEMON_JSON}", spec=spec)
