"""Declared containers (`spec.containers`), with drift detection pyinfra's own
`docker.container` lacks (its spec diff is always empty): the declared fields are compared
with `inspect` output, and a running container is never recreated unless allowed."""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra import host, logger
from pyinfra.api import OperationError, deploy, operation
from pyinfra.facts.hardware import Memory
from pyinfra.facts.server import Which

from facts.gpurig_container import ContainerInspect, CpuQuota
from gpurig.container_args import run_argv, with_defaults
from gpurig.container_spec import diff_container
from gpurig.inventory import parse_size


def _quoted(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


@operation()
def container(
    container: str,
    spec: dict[str, Any],
    engine: str,
    cpus: int = 1,
    gpu_check: bool = False,
    allow_recreate: bool = False,
):
    """Create, start or recreate the container so that it matches `spec`.

    `recreate` (never | if-stopped | always, default if-stopped) decides what happens to a
    container that drifted; a running one is recreated only with `allow_recreate`.
    """
    wanted = with_defaults(spec, cpus)
    current = host.get_fact(ContainerInspect, engine=engine, container=container)
    if current is not None:
        diffs = diff_container(wanted, current, engine)
        running = bool((current.get("State") or {}).get("Running"))
        if not diffs:
            if running:
                host.noop(f"container {container} matches its spec and is running")
                return
            yield f"{engine} start {shlex.quote(container)}"
            return
        named = "; ".join(f"{d.field}: expected {d.expected}, found {d.actual}" for d in diffs)
        policy = spec.get("recreate", "if-stopped")
        if policy == "never" or (running and policy != "always" and not allow_recreate):
            state = "running" if running else "stopped"
            remedy = (
                "recreate it by hand, or set recreate: if-stopped or always"
                if policy == "never"
                else "recreate it by hand, or converge with --data allow_recreate=true"
            )
            raise OperationError(
                f"container {container} ({state}) differs from its spec: {named}. gpurig does not "
                f"recreate it (recreate: {policy}); {remedy}"
            )
        yield f"{engine} rm --force {shlex.quote(container)}"
    yield _quoted([engine, "pull", wanted["image"]])
    yield _quoted(run_argv(engine, container, wanted))
    if gpu_check and wanted.get("gpus", "none") != "none":
        message = f"gpurig: GPU not visible inside container {container} (nvidia-smi failed)"
        yield (
            f"{engine} exec {shlex.quote(container)} nvidia-smi -L >/dev/null "
            f"|| {{ echo {shlex.quote(message)} >&2; exit 1; }}"
        )


@deploy("Containers")
def containers(spec: dict[str, Any]) -> None:
    declared = spec.get("containers") or {}
    engine = spec.get("engine", "none")
    if not declared or engine == "none":
        return
    memory_mb = host.get_fact(Memory)
    for name, cspec in declared.items():
        if "shm_size" in cspec and memory_mb and parse_size(cspec["shm_size"]) > memory_mb << 20:
            logger.warning(
                f"{host.name}: container {name} shm_size {cspec['shm_size']} is larger than the "
                f"host's memory ({memory_mb} MB): writes past it fail with SIGBUS"
            )
    cpus = host.get_fact(CpuQuota)
    gpu_check = spec.get("gpu", "auto") != "absent" and bool(host.get_fact(Which, "nvidia-smi"))
    allow = str(host.data.get("allow_recreate", "")).lower() in ("1", "true", "yes")
    for name, cspec in declared.items():
        container(
            name=f"Container {name}",
            container=name,
            spec=cspec,
            engine=engine,
            cpus=cpus,
            gpu_check=gpu_check,
            allow_recreate=allow,
        )
