"""The container engine (`engine`): Docker or Podman, with Podman's Docker-compatible socket
for nodes that serve sandboxes to agents (their tools speak Docker's API). Docker's daemon.json keys
gpurig owns (insecure registries, the nvidia runtime) are judged here, so one write and one
restart carry them all."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from gpurig.data.tables import table
from gpurig.facts.gpurig_json import JsonFile
from gpurig.facts.gpurig_packages import OsRelease
from gpurig.facts.gpurig_units import Units
from gpurig.facts.gpurig_user import LoginProfile, UserPodman
from gpurig.plans.change import Change
from gpurig.plans.files import managed
from gpurig.plans.packages import missing
from gpurig.plans.profile import block
from gpurig.spec.model import toolkit_wanted
from gpurig.spec.user_scope import DOCKER_HOST_LINES, REGISTRIES, is_user

PODMAN_SOCKET = "/run/podman/podman.sock"
DOCKER_HOST_PROFILE = "/etc/profile.d/gpurig-docker-host.sh"
PODMAN_REGISTRIES = "/etc/containers/registries.conf.d/90-gpurig.conf"
DAEMON_JSON = "/etc/docker/daemon.json"
DOCKER_HOST_LINE = (
    "# Managed by gpurig: docker CLI and SDK use Podman.\n"
    f"export DOCKER_HOST=unix://{PODMAN_SOCKET}\n"
)
NVIDIA_RUNTIME = {"nvidia": {"path": "nvidia-container-runtime", "args": []}}


def engine_packages(kind: str, os_id: str | None, os_version: str | None) -> list[str]:
    """The packages `engine: kind` installs on this release (gpurig/data/releases.yaml)."""
    packages = table("releases.yaml")["engine_packages"]
    return packages.get(f"{os_id} {os_version}", packages["default"])[kind]


def engine_elsewhere(kind: str) -> list[str]:
    """Packages that run `engine: kind` from another source (Docker's own repository):
    installed, they are the engine; apt would remove them to install this release's."""
    return table("releases.yaml")["engine_elsewhere"][kind]


def all_engine_packages(kind: str) -> list[str]:
    """Every package `engine: kind` installs on some release: what the plan reads, by the
    spec alone, before it knows the release."""
    rows = table("releases.yaml")["engine_packages"].values()
    return sorted({name for row in rows for name in row[kind]})


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


def _rootless(state: Mapping[str, Any]) -> list[Change]:
    """A user without a subordinate uid/gid range gets a Podman that cannot map an image's
    users: nothing the user can change."""
    if state["subuid"] and state["subgid"]:
        return []
    user = state["user"]
    return [
        Change(
            "engine.rootless",
            f"user {user}",
            "a subordinate uid and gid range (/etc/subuid, /etc/subgid)",
            "none",
            f"ask the cluster's admins to give {user} one (usermod --add-subuids, "
            "--add-subgids): rootless Podman needs it",
            refused=True,
        )
    ]


def _user_unit(state: Mapping[str, Any], sock: str) -> list[Change]:
    """A lingering user: podman.socket in the user's own systemd manager."""
    changes = []
    if state["service"] is not None:  # left from before lingering: never two services
        changes.append(
            Change(
                "engine.user_service",
                "gpurig's supervised podman system service",
                "stopped (podman.socket serves this user)",
                f"running (pid {state['service']})",
                "stop gpurig's supervised podman service",
                data={"start": "stop"},
            )
        )
    manager = state.get("manager") or "no answer"
    if manager not in ("running", "degraded", "starting", "initializing"):
        return [
            *changes,
            Change(
                "engine.socket",
                f"systemd --user manager of {state['user']}",
                "running (the user is lingering)",
                manager,
                f"ask the cluster's admins why user@{state['uid']}.service is not running, or "
                "turn lingering off (loginctl disable-linger) to let gpurig supervise the "
                "service itself",
                refused=True,
            ),
        ]
    active, enabled = state.get("unit_active") or "unknown", state.get("unit_enabled") or "unknown"
    if (active, enabled, state["answers"]) == ("active", "enabled", True):
        return changes
    answers = "" if state["answers"] else f", {sock} not answering"
    return [
        *changes,
        Change(
            "engine.socket",
            "podman.socket (systemd --user)",
            f"active, enabled, answering _ping at {sock}",
            f"{active}, {enabled}{answers}",
            "enable and (re)start the user's podman.socket",
            data={"start": "systemd"},
        ),
    ]


def squatted(directory: str, owner: int | str, user: str) -> Change:
    """The user's runtime directory made by another account (`owner`: its uid, or "link"):
    drift's finding, and what the converge's lock and `up --local` say on meeting it."""
    found = "a symbolic link" if owner == "link" else f"a directory of uid {owner}"
    return Change(
        "engine.user_service",
        f"podman system service ({directory}/podman/podman.sock)",
        f"{directory}: a directory of {user}'s",
        found,
        "leave it alone (another account made it): ask the cluster's admins to remove it; "
        "gpurig will not put the user's socket there",
        refused=True,
    )


def _user_service(state: Mapping[str, Any], sock: str) -> list[Change]:
    """Not lingering: gpurig's own `podman system service --time=0`, one per user and node."""
    owner, subject = state["supervised_dir"], f"podman system service ({sock})"
    if owner == "link" or owner not in (None, state["uid"]):
        return [squatted(state["runtime_dir"], owner, state["user"])]
    if state["answers"]:
        return []
    if state["service"] is not None:
        actual = f"running (pid {state['service']}), not answering"
    elif state["socket"] != "missing":
        actual = "a stale socket, no service"
    else:
        actual = "no service"
    return [
        Change(
            "engine.user_service",
            subject,
            "running, answering _ping",
            actual,
            "start podman system service --time=0 in place of what is there",
            data={"start": "supervised"},
        )
    ]


def _user(spec: Mapping[str, Any], read: Callable[..., Any]) -> list[Change]:
    """scope: user: the user's rootless Podman, reached through its API socket, with
    DOCKER_HOST in the user's login shells and the insecure registries in the user's
    registries.conf.d."""
    podman, socket = spec["engine"] == "podman", spec["podman_socket"]
    lines = DOCKER_HOST_LINES if podman and socket else None
    docker_host = block("engine.docker_host", "docker_host", lines, read(LoginProfile))
    if not podman:
        return docker_host
    tools = missing(["podman", "curl"], read, "for the user's Podman", user=True)
    registries = {REGISTRIES: podman_registries(spec["insecure_registries"])}
    written = managed("engine.registries", registries, read)
    if not socket:
        return tools + written + docker_host
    state = read(UserPodman)
    if tools:
        return tools
    sock = f"{state['runtime_dir']}/podman/podman.sock"
    served = _user_unit(state, sock) if state["linger"] else _user_service(state, sock)
    return _rootless(state) + written + served + docker_host


def plan(spec: Mapping[str, Any], read: Callable[..., Any]) -> list[Change]:
    if is_user(spec):
        return _user(spec, read)
    kind = spec["engine"]
    if kind == "none":
        return []
    # Every read first: plans read by the spec alone (see gpurig.plans).
    unit = "docker" if kind == "docker" else "podman.socket"
    units = read(Units, units=[unit])
    release = read(OsRelease)
    wanted = engine_packages(kind, release["os_id"], release["os_version"])
    packages = missing(wanted, read, f"engine {kind}", among=all_engine_packages(kind),
                       unless=engine_elsewhere(kind))  # fmt: skip
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
