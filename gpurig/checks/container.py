"""Containers' running state, which the converge does not manage: a command that crashes and
restarts, processes the kernel OOM-killed, an engine API that does not answer.

Pure rules `rule(spec, read) -> [Finding]` over each declared container's one read (its
inspect and its cgroup's OOM count: gpurig.plans.containers.container_reads) and the Podman
socket's answer; what a container is declared to be is judged by its plan. Rows:
gpurig/data/checks.yaml.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gpurig.checks.node import OOM_FIX
from gpurig.checks.rules import found
from gpurig.facts.gpurig_container import ContainerInspect
from gpurig.facts.gpurig_node import EngineSocket
from gpurig.plans.containers import container_reads
from gpurig.plans.engine import PODMAN_SOCKET
from gpurig.spec.finding import Finding
from gpurig.spec.user_scope import is_user

Read = Callable[..., Any]
Spec = Mapping[str, Any]

IDS = ("container.restarting", "container.oom_kill", "engine.api")


def _restarting(spec: Spec, read: Read) -> Iterator[Finding]:
    engine = spec["engine"]
    for name, container in container_reads(spec, read, ContainerInspect).items():
        inspect = container["inspect"] or {}
        state = inspect.get("State") or {}
        restarts = inspect.get("RestartCount") or 0
        if state.get("Restarting") or restarts > 0:
            yield found(
                "container.restarting",
                f"container {name}",
                f"container {name} has restarted: its command crashes",
                "0 restarts",
                f"{restarts} restarts" + (", restarting now" if state.get("Restarting") else ""),
                f"read `{engine} logs {name}` for the crash",
            )


def _oom(spec: Spec, read: Read) -> Iterator[Finding]:
    for name, container in container_reads(spec, read, ContainerInspect).items():
        kills = container["oom_kill"]
        main = ((container["inspect"] or {}).get("State") or {}).get("OOMKilled") is True
        if kills or main:
            actual = [f"oom_kill {kills} in its cgroup"] if kills else []
            actual += ["its main process was OOM-killed (State.OOMKilled)"] if main else []
            yield found(
                "container.oom_kill",
                f"container {name}",
                f"the kernel OOM-killed processes in container {name}: they die as a bare Killed",
                "oom_kill 0",
                "; ".join(actual),
                f"{OOM_FIX} for {name}",
            )


def engine_api(spec: Spec, read: Read) -> Iterator[Finding]:
    if is_user(spec) or spec["engine"] != "podman" or not spec["podman_socket"]:
        return  # the user's own socket is the engine plan's (it asks for _ping itself)
    if read(EngineSocket, path=PODMAN_SOCKET)["answers"] is False:
        # The socket unit's own name: a stopped unit (engine.socket) explains it.
        yield found(
            "engine.api",
            "podman.socket",
            "the Podman API socket exists but does not answer",
            f"{PODMAN_SOCKET} answering _ping",
            "no answer",
            "read `journalctl -u podman.socket -u podman.service`; restart podman.socket",
        )


RULES = (engine_api,)
# What reads inside declared containers: a node contract's mode may leave it out for time.
CONTAINER_RULES = (_restarting, _oom)
