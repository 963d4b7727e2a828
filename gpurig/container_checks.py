"""Containers' running state, which the converge does not manage: a command that crashes and
restarts, processes the kernel OOM-killed, an engine API that does not answer.

Pure `check(spec, probe) -> [Finding]` over facts/probe.py's typed document (each declared
container's `inspect` and cgroup counters); what a container is declared to be is judged by
its plan (gpurig.plans.containers). Rows: gpurig/data/checks.yaml.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpurig.finding import Finding
from gpurig.node_checks import OOM_FIX
from gpurig.rules import found
from gpurig.user_scope import is_user

Probe = Mapping[str, Any]
Spec = Mapping[str, Any]

IDS = ("container.restarting", "container.oom_kill", "engine.api")


def _restarting(_spec: Spec, probe: Probe) -> Iterator[Finding]:
    for container in probe.get("containers") or []:
        inspect = container.get("inspect") or {}
        state = inspect.get("State") or {}
        restarts = inspect.get("RestartCount") or 0
        name, engine = container["name"], container.get("engine") or "docker"
        if state.get("Restarting") or restarts > 0:
            yield found(
                "container.restarting",
                f"container {name}",
                f"container {name} has restarted: its command crashes",
                "0 restarts",
                f"{restarts} restarts" + (", restarting now" if state.get("Restarting") else ""),
                f"read `{engine} logs {name}` for the crash",
            )


def _oom(_spec: Spec, probe: Probe) -> Iterator[Finding]:
    for container in probe.get("containers") or []:
        name, kills = container["name"], container.get("oom_kill")
        main = ((container.get("inspect") or {}).get("State") or {}).get("OOMKilled") is True
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


def _engine_api(spec: Spec, probe: Probe) -> Iterator[Finding]:
    socket = (probe.get("engine") or {}).get("podman_socket") or {}
    if is_user(spec):
        return  # the user's own socket is the engine plan's (it asks for _ping itself)
    if spec["engine"] == "podman" and spec["podman_socket"] and socket.get("answers") is False:
        # The socket unit's own name: a stopped unit (engine.socket) explains it.
        yield found(
            "engine.api",
            "podman.socket",
            "the Podman API socket exists but does not answer",
            f"{socket.get('path')} answering _ping",
            "no answer",
            "read `journalctl -u podman.socket -u podman.service`; restart podman.socket",
        )


_RULES = (_restarting, _oom, _engine_api)


def check(spec: Spec, probe: Probe) -> list[Finding]:
    """Every finding about the declared containers' running state and the engine's API."""
    return [finding for rule in _RULES for finding in rule(spec, probe)]
