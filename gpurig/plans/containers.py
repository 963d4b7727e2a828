"""Declared containers (`containers`), compared field by field with `inspect` (pyinfra's own
`docker.container` detects no drift). A running container is never recreated unless its
`recreate` policy or the converge's opt-in says so: the drift is reported instead."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from gpurig.facts.gpurig_container import USER_SOCKET, ContainerInspect, CpuQuota
from gpurig.facts.gpurig_nvidia import NvidiaGpus
from gpurig.facts.gpurig_user import UserPodman
from gpurig.plans.change import Change
from gpurig.spec.container import diff_container
from gpurig.spec.user_scope import CONTAINER_HOST, is_user

OPT_IN = "pyinfra inventory.py deploys/gpu_host.py --data allow_recreate=true"


def container_reads(
    spec: Mapping[str, Any], read: Callable[..., Any], fact: type
) -> dict[str, Any]:
    """{name: `fact`'s value} for each declared container (none without an engine): the one
    reader of a container's state for the plan and the checks; with scope: user, through the
    user's Podman API socket."""
    if spec["engine"] == "none":
        return {}
    if is_user(spec):
        fact = USER_SOCKET[fact]
    return {name: read(fact, engine=spec["engine"], container=name) for name in spec["containers"]}


def usable_cpus(quota: Mapping[str, Any]) -> int:
    """Whole CPUs a job may keep busy (CpuQuota): the quota rounded up, else nproc; at least 1."""
    cpus = math.ceil(quota["cpus"]) if quota["cpus"] is not None else quota["nproc"]
    return max(1, cpus or 1)


def resolved(declared: Mapping[str, Any], cpus: int) -> dict[str, Any]:
    """The normalised spec with `omp_num_threads` turned into OMP_NUM_THREADS."""
    out = dict(declared)
    omp = declared.get("omp_num_threads")
    if omp is not None:
        out["env"] = {**declared["env"], "OMP_NUM_THREADS": str(cpus if omp == "auto" else omp)}
    return out


def _one(
    name: str, wanted: Mapping[str, Any], inspect: Mapping[str, Any] | None, engine: str,
    gpu_check: bool, allow_recreate: bool, user: bool = False,
) -> list[Change]:  # fmt: skip
    # `env`: what goes before each engine command (scope: user: the user's API socket);
    # `spec`: the container as it is run (gpurig.spec.container.run_argv).
    data = {"container": name, "engine": engine, "image": wanted["image"], "spec": wanted,
            "env": CONTAINER_HOST if user else "",
            "gpu_check": gpu_check and wanted["gpus"] != "none"}  # fmt: skip
    if inspect is None:
        return [
            Change(
                "container.missing",
                f"container {name}",
                "exists",
                "missing",
                f"pull {wanted['image']} and run {name}",
                data=data,
            )
        ]
    running = bool((inspect.get("State") or {}).get("Running"))
    diffs = diff_container(wanted, inspect, engine)
    if not diffs:
        if running:
            return []
        state = (inspect.get("State") or {}).get("Status") or "stopped"
        return [
            Change(
                "container.not_running",
                f"container {name}",
                "running",
                state,
                f"start {name}",
                data={**data, "start": True},
            )
        ]
    policy = wanted["recreate"]
    refused = policy == "never" or (running and policy != "always" and not allow_recreate)
    state = "running" if running else "stopped"
    if policy == "never":
        action = f"gpurig does not recreate {name} ({state}, recreate: never): do it by hand"
    elif refused:
        action = (
            f"gpurig does not recreate the running {name}: stop its job first, "
            f"or opt in with `{OPT_IN}`"
        )
    else:
        action = f"recreate {name} ({state}) from the spec"
    return [
        Change(
            f"container.{d.field}",
            f"container {name}",
            d.expected,
            d.actual,
            action,
            refused=refused,
            field=d.field,
            data={**data, "recreate": True},
        )
        for d in diffs
    ]


def plan(
    spec: Mapping[str, Any], read: Callable[..., Any], allow_recreate: bool = False
) -> list[Change]:
    declared, engine = spec["containers"], spec["engine"]
    if not declared:
        return []
    if engine == "none":
        return [
            Change(
                "container.engine",
                f"container {name}",
                "engine: docker or podman",
                "engine: none",
                "run no container on a host without an engine",
                refused=True,
            )
            for name in declared
        ]
    cpus = usable_cpus(read(CpuQuota))
    gpu = read(NvidiaGpus)
    gpu_check = spec["gpu"] != "absent" and gpu["smi"]
    found = {
        name: r["inspect"] for name, r in container_reads(spec, read, ContainerInspect).items()
    }
    if is_user(spec) and not read(UserPodman).get("answers"):
        # The user's containers are seen only through its API socket: the engine's change
        # starts it, and the converge reads them afresh after that change.
        return []
    changes = []
    for name, cspec in declared.items():
        wanted = resolved(cspec, cpus)
        changes += _one(name, wanted, found[name], engine, gpu_check, allow_recreate, is_user(spec))
    return changes
