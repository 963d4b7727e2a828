"""The container engine (`engine`): Docker or Podman, with Podman's Docker-compatible socket
for nodes that serve sandboxes to agents (field notes 001, 004). Docker's daemon.json keys
gpurig owns (insecure registries, the nvidia runtime) are judged here, so one write and one
restart carry them all."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from facts.gpurig_json import JsonFile
from facts.gpurig_units import Units
from gpurig.change import Change
from gpurig.plans.files import managed
from gpurig.plans.packages import missing

PODMAN_SOCKET = "/run/podman/podman.sock"
DOCKER_HOST_PROFILE = "/etc/profile.d/gpurig-docker-host.sh"
PODMAN_REGISTRIES = "/etc/containers/registries.conf.d/90-gpurig.conf"
DAEMON_JSON = "/etc/docker/daemon.json"
DOCKER_HOST_LINE = (
    "# Managed by gpurig: docker CLI and SDK use Podman.\n"
    f"export DOCKER_HOST=unix://{PODMAN_SOCKET}\n"
)
PACKAGES = {"docker": ["docker.io"], "podman": ["podman"]}
NVIDIA_RUNTIME = {"nvidia": {"path": "nvidia-container-runtime", "args": []}}


def toolkit_wanted(spec: Mapping[str, Any]) -> bool:
    """The NVIDIA container toolkit is converged: declared, an engine, and GPUs not ruled out."""
    return bool(spec.get("nvidia_toolkit")) and spec["engine"] != "none" and spec["gpu"] != "absent"


def podman_registries(insecure: list[str]) -> str:
    blocks = "".join(f'[[registry]]\nlocation = "{r}"\ninsecure = true\n\n' for r in insecure)
    return "# Managed by gpurig.\n" + blocks


def daemon_keys(spec: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """daemon.json keys gpurig owns for this spec: key -> (change id, wanted value)."""
    keys: dict[str, tuple[str, Any]] = {}
    if spec["insecure_registries"]:
        keys["insecure-registries"] = ("engine.insecure_registries", spec["insecure_registries"])
    if toolkit_wanted(spec):
        keys["runtimes"] = ("toolkit.runtime", NVIDIA_RUNTIME)
    return keys


def merged(current: Mapping[str, Any], owned: Mapping[str, Any]) -> dict[str, Any]:
    """`current` with gpurig's keys set; maps merge one level deep so foreign entries stay."""
    out = dict(current)
    for key, value in owned.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def _daemon_json(spec: Mapping[str, Any], current: dict[str, Any] | None) -> list[Change]:
    keys = daemon_keys(spec)
    if current is None:
        return [
            Change(
                "engine.daemon_json",
                DAEMON_JSON,
                "a JSON object",
                "not valid JSON",
                f"leave {DAEMON_JSON} alone: fix or move it, gpurig will not guess",
                refused=True,
            )
        ]
    owned = {key: value for key, (_, value) in keys.items()}
    wanted = merged(current, owned)
    changes = []
    for key, (change_id, value) in keys.items():
        if wanted[key] != current.get(key):
            changes.append(
                Change(
                    change_id,
                    DAEMON_JSON,
                    json.dumps(value),
                    "(not set)" if key not in current else json.dumps(current[key]),
                    f"set {key} in {DAEMON_JSON} (other keys kept) and restart docker",
                    field=key,
                    data={"daemon_json": wanted},
                )
            )
    return changes


def _service(unit: str, units: Mapping[str, Any], change_id: str) -> list[Change]:
    state = units["units"].get(unit) or {}
    actual = f"{state.get('active') or 'unknown'}, {state.get('enabled') or 'unknown'}"
    if state.get("active") == "active" and state.get("enabled") == "enabled":
        return []
    return [
        Change(
            change_id,
            unit,
            "active, enabled",
            actual,
            f"enable and start {unit}",
            data={"unit": unit},
        )
    ]


def plan(spec: Mapping[str, Any], read: Callable[..., Any]) -> list[Change]:
    kind = spec["engine"]
    if kind == "none":
        return []
    # Every read first: plans read by the spec alone (see gpurig.plans).
    unit = "docker" if kind == "docker" else "podman.socket"
    units = read(Units, units=[unit])
    packages = missing(PACKAGES[kind], read, f"engine {kind}")
    if kind == "docker":
        daemon_json = _daemon_json(spec, read(JsonFile, path=DAEMON_JSON))
        rest = _service("docker", units, "engine.service") + daemon_json
    else:
        socket = spec["podman_socket"]
        registries = {PODMAN_REGISTRIES: podman_registries(spec["insecure_registries"])}
        profile = {DOCKER_HOST_PROFILE: DOCKER_HOST_LINE if socket else None}
        written = managed("engine.registries", registries, read)
        written += managed("engine.docker_host", profile, read)
        rest = (_service("podman.socket", units, "engine.socket") if socket else []) + written
    if not units["systemd"]:
        # A host without systemd is itself a container (a pod): it cannot run an engine's
        # daemon or socket under supervision, and a hand-started one dies unnoticed.
        return [
            Change(
                "engine.systemd",
                f"engine {kind}",
                "systemd on the host",
                "no systemd",
                "install no engine on a host without systemd; a pod should use engine: none",
                refused=True,
            )
        ]
    return packages + rest
