"""Compare a declared container with what `docker inspect` / `podman inspect` reports.

Pure: the drift check reports the differences, the converge operation decides from them
whether to recreate. Both engines' inspect shapes are read (Docker's GPU DeviceRequests,
Podman's CDI devices, Podman's RLIMIT_ names and uint64 'unlimited'), and every value is
normalised to the spec's own vocabulary before comparing, so one difference is one FieldDiff.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpurig.inventory import parse_size

# The kernel's RLIM_INFINITY as Podman prints it (uint64), and as Docker prints it.
_UNLIMITED = {2**64 - 1, 2**63 - 1, -1}
_CDI_GPU = re.compile(r"nvidia\.com/gpu=(\w+)")
# Declared container keys compared with inspect (recreate policy is converge's, not state).
FIELDS = (
    "image", "shm_size", "user", "network", "gpus", "mounts", "env", "ulimits", "command",
    "restart",
)  # fmt: skip


@dataclass(frozen=True)
class FieldDiff:
    """One declared field whose running value differs; values rendered for a report."""

    field: str
    expected: str
    actual: str


def image_digest(reference: str) -> str | None:
    """The `sha256:...` part of `name@sha256:...`, or None for a tag reference."""
    return reference.split("@", 1)[1] if "@" in reference else None


def _image(inspect: Mapping[str, Any]) -> str:
    """The reference the container was created from (Podman also keeps it as ImageName)."""
    return (inspect.get("Config") or {}).get("Image") or inspect.get("ImageName") or ""


def actual_gpus(inspect: Mapping[str, Any], engine: str) -> str | int | list[int]:
    """GPUs the container was given, in the spec's terms: all, none, a count or indices."""
    host = inspect.get("HostConfig") or {}
    if engine == "podman":
        names = [
            match[1]
            for device in host.get("Devices") or []
            if (match := _CDI_GPU.fullmatch(str(device.get("PathOnHost", ""))))
        ]
        if "all" in names:
            return "all"
        return sorted(int(n) for n in names if n.isdigit()) or "none"
    for request in host.get("DeviceRequests") or []:
        if not any("gpu" in caps for caps in request.get("Capabilities") or []):
            continue
        if request.get("DeviceIDs"):
            return sorted(int(i) for i in request["DeviceIDs"] if str(i).isdigit())
        count = request.get("Count", 0)
        return "all" if count == -1 else count
    return "none"


def _gpus_match(declared: Any, actual: str | int | list[int], engine: str) -> bool:
    if declared in ("none", 0, []):
        return actual == "none"
    if isinstance(declared, int) and engine == "podman":
        # CDI has no "any N GPUs": a count is converged as that many indices.
        return isinstance(actual, list) and len(actual) == declared
    if isinstance(declared, list):
        return actual == sorted(declared)
    return actual == declared


def _mount_key(source: str, destination: str, read_only: bool) -> str:
    return f"{source}:{destination}{':ro' if read_only else ''}"


def declared_mounts(mounts: list[str]) -> list[str]:
    """Spec mounts as `SRC:DST[:ro]` (only the read-only option is visible in inspect)."""
    keys = []
    for mount in mounts:
        source, destination, *options = mount.split(":")
        read_only = bool(options) and "ro" in options[0].split(",")
        keys.append(_mount_key(source, destination, read_only))
    return sorted(keys)


def actual_mounts(inspect: Mapping[str, Any]) -> list[str]:
    """Mounts as `SRC:DST[:ro]`; a named volume by its name, as the spec writes it."""
    mounts = inspect.get("Mounts")
    if mounts is None:
        return declared_mounts((inspect.get("HostConfig") or {}).get("Binds") or [])
    return sorted(
        _mount_key(
            m.get("Name") if m.get("Type") == "volume" else m.get("Source", ""),
            m.get("Destination", ""),
            not m.get("RW", True),
        )
        for m in mounts
    )


def _limit(value: Any) -> int:
    return -1 if value in _UNLIMITED else int(value)


def declared_ulimit(value: int | str) -> tuple[int, int]:
    """(soft, hard) from `0`, `-1` or `'1024:4096'`."""
    if isinstance(value, int):
        return value, value
    soft, hard = value.split(":")
    return int(soft), int(hard)


def actual_ulimits(inspect: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """Ulimits by the spec's names (Podman's `RLIMIT_NOFILE` is `nofile`)."""
    return {
        str(u.get("Name", "")).lower().removeprefix("rlimit_"): (
            _limit(u.get("Soft")),
            _limit(u.get("Hard")),
        )
        for u in (inspect.get("HostConfig") or {}).get("Ulimits") or []
    }


def _env(inspect: Mapping[str, Any]) -> dict[str, str]:
    pairs = (item.partition("=") for item in (inspect.get("Config") or {}).get("Env") or [])
    return {key: value for key, _, value in pairs}


def _network(inspect: Mapping[str, Any]) -> str:
    mode = (inspect.get("HostConfig") or {}).get("NetworkMode") or ""
    return "bridge" if mode == "default" else mode


def _restart(inspect: Mapping[str, Any]) -> str:
    policy = (inspect.get("HostConfig") or {}).get("RestartPolicy") or {}
    name = policy.get("Name") or "no"
    retries = policy.get("MaximumRetryCount") or 0
    return f"{name}:{retries}" if name == "on-failure" else name


def _declared_restart(restart: Mapping[str, Any]) -> str:
    policy = restart["policy"]
    return f"{policy}:{restart.get('max_retries', 0)}" if policy == "on-failure" else policy


def _compare(field: str, expected: Any, actual: Any) -> list[FieldDiff]:
    return [] if expected == actual else [FieldDiff(field, str(expected), str(actual))]


def _fields(inspect: Mapping[str, Any], engine: str) -> dict[str, Callable[[Any], list[FieldDiff]]]:
    """Per declared key: how to compare it with this inspect document."""
    config = inspect.get("Config") or {}
    host = inspect.get("HostConfig") or {}
    env = _env(inspect)
    ulimits = actual_ulimits(inspect)

    def gpus(declared: Any) -> list[FieldDiff]:
        actual = actual_gpus(inspect, engine)
        ok = _gpus_match(declared, actual, engine)
        return [] if ok else [FieldDiff("gpus", str(declared), str(actual))]

    return {
        "image": lambda d: _compare("image", image_digest(d), image_digest(_image(inspect))),
        "shm_size": lambda d: _compare("shm_size", parse_size(d), host.get("ShmSize")),
        "user": lambda d: _compare("user", d, config.get("User") or "(image default)"),
        "network": lambda d: _compare("network", d, _network(inspect)),
        "gpus": gpus,
        "mounts": lambda d: _compare("mounts", declared_mounts(d), actual_mounts(inspect)),
        "env": lambda d: _compare("env", dict(d), {k: env.get(k) for k in d}),
        "ulimits": lambda d: _compare(
            "ulimits",
            {k: declared_ulimit(v) for k, v in sorted(d.items())},
            {k: ulimits.get(k) for k in sorted(d)},
        ),
        "command": lambda d: _compare("command", list(d), list(config.get("Cmd") or [])),
        "restart": lambda d: _compare("restart", _declared_restart(d), _restart(inspect)),
    }


def diff_container(
    spec: Mapping[str, Any], inspect: Mapping[str, Any], engine: str
) -> list[FieldDiff]:
    """Declared fields whose running value differs; undeclared fields are not compared."""
    comparisons = _fields(inspect, engine)
    return [
        diff
        for key, value in spec.items()
        if key in comparisons
        for diff in comparisons[key](value)
    ]
