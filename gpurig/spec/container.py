"""A declared container, field by field: its `run` arguments, its value as `docker inspect` /
`podman inspect` shows it, and the spec's value in the same vocabulary, one row per field.

Pure: the container plan compares with it, the converge runs what it builds. Both engines'
inspect shapes are read (Docker's GPU DeviceRequests, Podman's CDI devices, Podman's RLIMIT_
names and uint64 'unlimited'). Spec defaults come from gpurig.spec.model (applied at load).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from typing import Any

from gpurig.named_tuple import NamedTuple
from gpurig.spec.pattern import lazy
from gpurig.spec.redact import redacted
from gpurig.spec.units import format_size, parse_size

Inspect = Mapping[str, Any]

# The kernel's RLIM_INFINITY as Podman prints it (uint64), and as Docker prints it.
_UNLIMITED = {2**64 - 1, 2**63 - 1, -1}
_CDI_GPU = lazy(r"nvidia\.com/gpu=(\w+)")


class Field(NamedTuple):
    """One declared key: how the spec's value reads, how inspect's reads, how `run` sets it,
    and how a report shows either value (sizes in binary units, limits as soft:hard, env as
    KEY=value with credentials redacted, lists joined)."""

    name: str
    declared: Callable[[Any, str], Any]
    actual: Callable[[Inspect, str, Any], Any]
    run_args: Callable[[Any, str], list[str]]
    shown: Callable[[Any], str] = str


class FieldDiff(NamedTuple):
    """One declared field whose running value differs; values rendered for a report."""

    field: str
    expected: str
    actual: str


def image_digest(reference: str) -> str | None:
    """The `sha256:...` part of `name@sha256:...`, or None for a tag reference."""
    return reference.split("@", 1)[1] if "@" in reference else None


def running_image(inspect: Inspect, _engine: str = "", _declared: Any = None) -> str | None:
    """The digest the container was created from (Podman also keeps it as ImageName)."""
    return image_digest(
        (inspect.get("Config") or {}).get("Image") or inspect.get("ImageName") or ""
    )


def actual_gpus(inspect: Inspect, engine: str) -> str | int | list[int]:
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


def _gpus(inspect: Inspect, engine: str, declared: Any) -> Any:
    actual = actual_gpus(inspect, engine)
    # CDI has no "any N GPUs": a count is converged as that many indices.
    if isinstance(declared, int) and engine == "podman" and isinstance(actual, list):
        return len(actual) if len(actual) == declared else actual
    return actual


def gpu_args(gpus: Any, engine: str) -> list[str]:
    """The engine's run arguments giving a container `gpus` (a normalised spec value)."""
    if gpus == "none":
        return []
    if engine == "docker":
        if gpus == "all" or isinstance(gpus, int):
            return ["--gpus", str(gpus)]
        return ["--gpus", f'"device={",".join(str(i) for i in gpus)}"']
    # Podman reaches GPUs through the CDI spec the toolkit generates.
    if gpus == "all":
        return ["--device", "nvidia.com/gpu=all"]
    indices = range(gpus) if isinstance(gpus, int) else gpus
    return [arg for i in indices for arg in ("--device", f"nvidia.com/gpu={i}")]


def _mount_key(source: str, destination: str, read_only: bool) -> str:
    return f"{source}:{destination}{':ro' if read_only else ''}"


def declared_mounts(mounts: list[str], _engine: str = "") -> list[str]:
    """Spec mounts as `SRC:DST[:ro]` (only the read-only option is visible in inspect)."""
    keys = []
    for mount in mounts:
        source, destination, *options = mount.split(":")
        read_only = bool(options) and "ro" in options[0].split(",")
        keys.append(_mount_key(source, destination, read_only))
    return sorted(keys)


def actual_mounts(inspect: Inspect, _engine: str = "", _declared: Any = None) -> list[str]:
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


def actual_ulimits(inspect: Inspect) -> dict[str, tuple[int, int]]:
    """Ulimits by the spec's names (Podman's `RLIMIT_NOFILE` is `nofile`)."""
    return {
        str(u.get("Name", "")).lower().removeprefix("rlimit_"): (
            _limit(u.get("Soft")),
            _limit(u.get("Hard")),
        )
        for u in (inspect.get("HostConfig") or {}).get("Ulimits") or []
    }


def _env(inspect: Inspect, _engine: str, declared: Mapping[str, str]) -> dict[str, str | None]:
    pairs = (item.partition("=") for item in (inspect.get("Config") or {}).get("Env") or [])
    env = {key: value for key, _, value in pairs}
    return {key: env.get(key) for key in declared}


def _network(inspect: Inspect, _engine: str, _declared: Any) -> str:
    mode = (inspect.get("HostConfig") or {}).get("NetworkMode") or ""
    return "bridge" if mode == "default" else mode


def restart_policy(restart: Mapping[str, Any], _engine: str = "") -> str:
    policy = restart["policy"]
    return f"{policy}:{restart.get('max_retries', 0)}" if policy == "on-failure" else policy


def _restart(inspect: Inspect, _engine: str, _declared: Any) -> str:
    policy = (inspect.get("HostConfig") or {}).get("RestartPolicy") or {}
    name = policy.get("Name") or "no"
    retries = policy.get("MaximumRetryCount") or 0
    return f"{name}:{retries}" if name == "on-failure" else name


def _ulimit_arg(value: int | str) -> str:
    return f"{value}:{value}" if isinstance(value, int) else str(value)


def _unset(value: Any) -> str:
    return "(unset)" if value is None else str(value)


def _show_size(size: int | None) -> str:
    return "(engine default)" if size is None else format_size(size)


def _show_list(items: list[Any]) -> str:
    return ", ".join(str(i) for i in items) or "none"


def _show_gpus(gpus: Any) -> str:
    return _show_list(gpus) if isinstance(gpus, list) else str(gpus)


def _show_env(env: Mapping[str, str | None]) -> str:
    return " ".join(f"{k}={_unset(redacted(k, v))}" for k, v in env.items()) or "none"


def _show_limit(value: int) -> str:
    return "unlimited" if value == -1 else str(value)


def _show_ulimits(ulimits: Mapping[str, tuple[int, int] | None]) -> str:
    return " ".join(
        f"{name}=" + ("(unset)" if pair is None else ":".join(map(_show_limit, pair)))
        for name, pair in ulimits.items()
    )


def _show_command(command: list[Any]) -> str:
    argv = [str(a) for a in command]
    # The option an argument is the value of: the one before it, unless that carried its own.
    flags = ["", *(a if a.startswith("-") and "=" not in a else "" for a in argv)]
    return shlex.join(redacted(flag, arg) for flag, arg in zip(flags, argv)) or "none"


def _config(key: str, empty: Any) -> Callable[[Inspect, str, Any], Any]:
    return lambda inspect, _engine, _declared: (inspect.get("Config") or {}).get(key) or empty


def _flag(flag: str) -> Callable[[Any, str], list[str]]:
    return lambda value, _engine: [flag, str(value)]


FIELDS = (
    Field(
        "image",
        lambda v, _: image_digest(v),
        running_image,
        lambda v, _: [],  # the last argument
        lambda v: v or "(no digest)",
    ),
    Field(
        "shm_size",
        lambda v, _: parse_size(v),
        lambda i, _e, _d: (i.get("HostConfig") or {}).get("ShmSize"),
        lambda v, _: ["--shm-size", str(parse_size(v))],
        _show_size,
    ),
    Field("user", lambda v, _: str(v), _config("User", "(image default)"), _flag("--user")),
    Field("network", lambda v, _: v, _network, _flag("--network")),
    Field("gpus", lambda v, _: v, _gpus, gpu_args, _show_gpus),
    Field(
        "mounts",
        declared_mounts,
        actual_mounts,
        lambda v, _: [a for m in v for a in ("--volume", m)],
        _show_list,
    ),
    Field(
        "env",
        lambda v, _: dict(v),
        _env,
        lambda v, _: [],  # through the env file (run_argv)
        _show_env,
    ),
    Field(
        "ulimits",
        lambda v, _: {k: declared_ulimit(x) for k, x in sorted(v.items())},
        lambda i, _e, d: {k: actual_ulimits(i).get(k) for k in sorted(d)},
        lambda v, _: [
            a for k, x in sorted(v.items()) for a in ("--ulimit", f"{k}={_ulimit_arg(x)}")
        ],
        _show_ulimits,
    ),
    Field(
        "command",
        lambda v, _: [str(p) for p in v],
        _config("Cmd", []),
        lambda v, _: [],
        _show_command,
    ),
    Field("restart", restart_policy, _restart, lambda v, e: ["--restart", restart_policy(v)]),
)
FIELD_NAMES = tuple(f.name for f in FIELDS)


def diff_container(spec: Mapping[str, Any], inspect: Inspect, engine: str) -> list[FieldDiff]:
    """Declared fields whose running value differs; undeclared fields are not compared."""
    diffs = []
    for row in FIELDS:
        if row.name not in spec:
            continue
        expected = row.declared(spec[row.name], engine)
        actual = row.actual(inspect, engine, spec[row.name])
        if expected != actual:
            diffs.append(FieldDiff(row.name, row.shown(expected), row.shown(actual)))
    return diffs


def env_file_content(env: Mapping[str, str]) -> bytes:
    """The environment as `--env-file` reads it, Docker and Podman alike: one `KEY=value` a
    line, the value as it is (no quoting; the schema keeps each value to one line)."""
    return "".join(f"{key}={value}\n" for key, value in sorted(env.items())).encode()


def run_argv(engine: str, name: str, spec: Mapping[str, Any], env_file: str) -> list[str]:
    """`ENGINE run --detach ...` for a normalised spec (gpurig.spec.model) with env resolved. The
    environment comes from `env_file` on the host (env_file_content), never from the command
    line, where every account on the host could read it."""
    argv = [engine, "run", "--detach", "--name", name, "--env-file", env_file]
    for row in FIELDS:
        if row.name in spec:
            argv += row.run_args(spec[row.name], engine)
    return [*argv, spec["image"], *(str(part) for part in spec.get("command") or [])]


# Where an image without a registry lives (docker's default).
DOCKER_HUB = "registry-1.docker.io"


class ImageRef(NamedTuple):
    """Where an image lives: registry host[:port], repository path and tag."""

    registry: str
    repository: str
    tag: str

    @classmethod
    def parse(cls, image: str) -> ImageRef:
        """Split `[registry/]name[:tag]` the way docker does (docker.io, library/, latest)."""
        name, tag = image, "latest"
        last = image.rsplit("/", 1)[-1]
        if ":" in last:
            name, tag = image.rsplit(":", 1)
        first, _, rest = name.partition("/")
        if rest and ("." in first or ":" in first or first == "localhost"):
            return cls(first, rest, tag)
        return cls(DOCKER_HUB, name if rest else f"library/{name}", tag)
