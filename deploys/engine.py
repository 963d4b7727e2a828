"""The container engine (`spec.engine`): Docker or Podman, with Podman's Docker-compatible
socket for SLURM-style nodes that serve sandboxes to agents (field notes 001, 004)."""

from __future__ import annotations

from io import StringIO
from typing import Any

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.files import Directory
from pyinfra.operations import files, systemd

from deploys.guard import refuse
from deploys.json_config import json_keys
from deploys.packages import ensure_packages

PODMAN_SOCKET = "/run/podman/podman.sock"
DOCKER_HOST_PROFILE = "/etc/profile.d/gpurig-docker-host.sh"
PODMAN_REGISTRIES = "/etc/containers/registries.conf.d/90-gpurig.conf"
DAEMON_JSON = "/etc/docker/daemon.json"
DOCKER_HOST_LINE = f"# Managed by gpurig: docker CLI and SDK use Podman.\nexport DOCKER_HOST=unix://{PODMAN_SOCKET}\n"
PACKAGES = {"docker": ["docker.io"], "podman": ["podman"]}


def podman_registries(insecure: list[str]) -> str:
    blocks = "".join(f'[[registry]]\nlocation = "{r}"\ninsecure = true\n\n' for r in insecure)
    return "# Managed by gpurig.\n" + blocks


def has_systemd() -> bool:
    return bool(host.get_fact(Directory, path="/run/systemd/system"))


def docker_daemon_keys(owned: dict[str, Any], action: str) -> None:
    """Merge `owned` into daemon.json, every other key kept, and restart docker only when the
    file changed: a restart stops every container without a restart policy."""
    config = json_keys(name=f"{action} {DAEMON_JSON}", path=DAEMON_JSON, owned=owned)
    systemd.service(name="Restart docker for its new config", service="docker",
                    restarted=True, _if=config.did_change)  # fmt: skip


@deploy("Container engine")
def engine(spec: dict[str, Any]) -> None:
    kind = spec.get("engine", "none")
    if kind == "none":
        return
    if not has_systemd():
        # A host without systemd is itself a container (a pod): it cannot run an engine's
        # daemon or socket under supervision, and a hand-started one dies unnoticed.
        refuse(reason=f"engine: {kind} needs systemd on the host; a pod should use engine: none")
        return
    ensure_packages(PACKAGES[kind])
    insecure = spec.get("insecure_registries") or []
    if kind == "docker":
        systemd.service(name="docker running and enabled", service="docker", running=True,
                        enabled=True)  # fmt: skip
        docker_daemon_keys({"insecure-registries": insecure} if insecure else {},
                           "Merge gpurig's keys into")  # fmt: skip
        return
    files.put(name=f"Write {PODMAN_REGISTRIES}", src=StringIO(podman_registries(insecure)),
              dest=PODMAN_REGISTRIES, mode="644")  # fmt: skip
    if not spec.get("podman_socket", False):
        files.file(name=f"Remove {DOCKER_HOST_PROFILE}", path=DOCKER_HOST_PROFILE, present=False)
        return
    systemd.service(name="podman.socket", service="podman.socket", running=True, enabled=True)
    files.put(name=f"Write {DOCKER_HOST_PROFILE}", src=StringIO(DOCKER_HOST_LINE),
              dest=DOCKER_HOST_PROFILE, mode="644")  # fmt: skip
