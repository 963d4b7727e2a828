"""A host's spec with every default filled in and every value in one spelling.

Applied once, when the inventory is loaded (DESIGN: defaults live in one place), so the
converge, the drift check and onboarding read the same values and none re-derives a default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Every training container gets these unless its spec says otherwise: unbuffered logs (a
# crash loses no output), no core dumps (a crash does not fill the disk), and a bounded
# restart policy (a container that exits at once must not restart forever).
CONTAINER_ENV = {"PYTHONUNBUFFERED": "1"}
CONTAINER_ULIMITS = {"core": 0}
CONTAINER_RESTART = {"policy": "on-failure", "max_retries": 5}

TOOLKIT_KEY = "https://nvidia.github.io/libnvidia-container/gpgkey"
TOOLKIT_REPO = "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"
# Docker's release asset for x86_64 hosts; an aarch64 host declares the -aarch64 one's url.
COMPOSE_URL = (
    "https://github.com/docker/compose/releases/download/v{version}/docker-compose-linux-x86_64"
)

_TOP = {
    "scope": "system",
    "engine": "none",
    "podman_socket": False,
    "gpu": "auto",
    "core_dumps": "disabled",
    "packages": [],
    "insecure_registries": [],
    "containers": {},
    "repos": {},
    "secrets": [],
    "cleanup": {},
    "checks": {},
}


def gpus(value: Any) -> str | int | list[int]:
    """`none`, `0` and `[]` are one thing (no GPU); a list is sorted."""
    if value in (None, "none", 0, []):
        return "none"
    if isinstance(value, list):
        return sorted(value)
    return value


def _container(declared: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(declared)
    out["gpus"] = gpus(declared.get("gpus"))
    out["env"] = {**CONTAINER_ENV, **(declared.get("env") or {})}
    out["ulimits"] = {**CONTAINER_ULIMITS, **(declared.get("ulimits") or {})}
    out["restart"] = {**(declared.get("restart") or CONTAINER_RESTART)}
    out["restart"].setdefault("max_retries", 0)
    out.setdefault("recreate", "if-stopped")
    return out


def _repo(path: str, declared: Mapping[str, Any]) -> dict[str, Any]:
    out = {"line_endings": "lf", **declared}
    if declared.get("python"):
        python = {"manager": "uv", "keep": [], "imports": [], **declared["python"]}
        python.setdefault("venv", f"{path}/.venv")
        out["python"] = python
    return out


def _copied(value: Any) -> Any:
    """A copy of plain data (what a spec parses to: mappings, lists, scalars) that shares
    nothing mutable with it; `copy.deepcopy` did this at the cost of loading `copy` and
    `weakref` at every node contract's start."""
    if isinstance(value, Mapping):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(item) for item in value)
    return value


def normalise(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec with defaults applied; idempotent (normalise(normalise(s)) == normalise(s))."""
    # A user's rootless Podman is reached through its API socket (gpurig.spec.user_scope), so a
    # user-scope Podman has one unless the spec says otherwise.
    user = spec.get("scope") == "user"
    top = {**_TOP, "podman_socket": user and spec.get("engine") == "podman"}
    out = _copied({**top, **spec})
    out["containers"] = {n: _container(c) for n, c in out["containers"].items()}
    out["repos"] = {p: _repo(p, r) for p, r in out["repos"].items()}
    out["secrets"] = [{"mode": "0600", **s} for s in out["secrets"]]
    if out.get("nvidia_toolkit"):
        out["nvidia_toolkit"] = {"key": TOOLKIT_KEY, "repo": TOOLKIT_REPO, **out["nvidia_toolkit"]}
    if out.get("driver"):
        # A user cannot hold packages: a user-scope driver is checked, not held.
        out["driver"] = {"hold": not user, **out["driver"]}
    if out.get("compose"):
        url = COMPOSE_URL.format(version=out["compose"]["version"])
        out["compose"] = {"url": url, **out["compose"]}
    return out


def toolkit_wanted(spec: Mapping[str, Any]) -> bool:
    """The NVIDIA container toolkit is converged: declared, an engine, and GPUs not ruled out."""
    return bool(spec.get("nvidia_toolkit")) and spec["engine"] != "none" and spec["gpu"] != "absent"


def gpu_containers(spec: Mapping[str, Any]) -> list[str]:
    """Names of the containers that are given GPUs."""
    return [n for n, c in spec["containers"].items() if c["gpus"] != "none"]


def gpu_container(spec: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(engine, container) that acceptance runs in: the first declared container given GPUs,
    else (None, None) for the host itself."""
    containers = gpu_containers(spec)
    if containers and spec["engine"] in ("docker", "podman"):
        return spec["engine"], containers[0]
    return None, None
