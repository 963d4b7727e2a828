"""A declared container as the engine's `run` arguments, with gpurig's safe defaults.

Pure: the converge operation yields these, the tests read them.
"""

from __future__ import annotations

from typing import Any

from gpurig.inventory import parse_size

# Every training container gets these unless its spec says otherwise: unbuffered logs (a
# crash loses no output), no core dumps (a crash does not fill the disk), and a bounded
# restart policy (a container that exits at once must not restart forever).
DEFAULT_ENV = {"PYTHONUNBUFFERED": "1"}
DEFAULT_ULIMITS = {"core": 0}
DEFAULT_RESTART = {"policy": "on-failure", "max_retries": 5}


def with_defaults(spec: dict[str, Any], cpus: int) -> dict[str, Any]:
    """The spec with gpurig's defaults filled in; `omp_num_threads: auto` becomes `cpus`."""
    out = dict(spec)
    env = {**DEFAULT_ENV, **(spec.get("env") or {})}
    omp = spec.get("omp_num_threads")
    if omp is not None:
        env["OMP_NUM_THREADS"] = str(cpus if omp == "auto" else omp)
    out["env"] = env
    out["ulimits"] = {**DEFAULT_ULIMITS, **(spec.get("ulimits") or {})}
    out["restart"] = spec.get("restart") or DEFAULT_RESTART
    return out


def _gpu_args(gpus: Any, engine: str) -> list[str]:
    if gpus in (None, "none"):
        return []
    if engine == "docker":
        if gpus == "all":
            return ["--gpus", "all"]
        if isinstance(gpus, int):
            return ["--gpus", str(gpus)]
        return ["--gpus", f'"device={",".join(str(i) for i in gpus)}"']
    # Podman reaches GPUs through the CDI spec the toolkit generates.
    if gpus == "all":
        return ["--device", "nvidia.com/gpu=all"]
    indices = range(gpus) if isinstance(gpus, int) else gpus
    return [arg for i in indices for arg in ("--device", f"nvidia.com/gpu={i}")]


def _ulimit(value: int | str) -> str:
    return f"{value}:{value}" if isinstance(value, int) else str(value)


def _restart(restart: dict[str, Any]) -> str:
    if restart["policy"] == "on-failure":
        return f"on-failure:{restart.get('max_retries', 0)}"
    return str(restart["policy"])


def run_argv(engine: str, name: str, spec: dict[str, Any]) -> list[str]:
    """`ENGINE run -d ...` for a spec that already has its defaults (see with_defaults)."""
    argv = [engine, "run", "--detach", "--name", name]
    if "shm_size" in spec:
        argv += ["--shm-size", str(parse_size(spec["shm_size"]))]
    if "user" in spec:
        argv += ["--user", str(spec["user"])]
    if "network" in spec:
        argv += ["--network", spec["network"]]
    argv += _gpu_args(spec.get("gpus"), engine)
    for mount in spec.get("mounts") or []:
        argv += ["--volume", mount]
    for key, value in sorted(spec["env"].items()):
        argv += ["--env", f"{key}={value}"]
    for key, value in sorted(spec["ulimits"].items()):
        argv += ["--ulimit", f"{key}={_ulimit(value)}"]
    argv += ["--restart", _restart(spec["restart"])]
    argv.append(spec["image"])
    argv += [str(part) for part in spec.get("command") or []]
    return argv
