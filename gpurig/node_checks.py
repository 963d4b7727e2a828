"""Node health beyond the GPU: OOM kills, cgroup leaks, per-cpu memory, shadowed imports.

Pure rules `rule(spec, read) -> [Finding]` over the node facts (facts/gpurig_node.py, the
containers' inspect, the environments' import reports), read through the checks' reader
(gpurig.checks). Each finding names
a remediation from gpu_health.yaml's list; ids, severities, sources and thresholds live in
gpurig/data/node_health.yaml (the field notes' cgroup OOM and Kubernetes/remote-Docker pages).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from facts.gpurig_container import ContainerInspect
from facts.gpurig_node import CgroupLeaks, CgroupMemory
from facts.gpurig_repo import EnvImports
from gpurig.compat import Finding
from gpurig.datafiles import table
from gpurig.gpu_checks import remedied

Read = Callable[..., Any]
Spec = Mapping[str, Any]
_GB = 1000**3


def rules() -> dict[str, Any]:
    """gpurig/data/node_health.yaml, loaded once."""
    return table("node_health.yaml")


def _finding(
    check_id: str, message: str, expected: str, actual: str, fix: str, severity: str | None = None
) -> Finding:
    row = rules()["checks"][check_id]
    return remedied(row, check_id, message, expected, actual, fix, severity=severity)


def _level(value: int, limits: Mapping[str, int | float], scale: int = 1) -> str | None:
    """'error' or 'warn' for a reading above the table's limits, None below both."""
    if value > limits["error"] * scale:
        return "error"
    return "warn" if value > limits["warn"] * scale else None


def container_reads(spec: Spec, read: Read, fact: type) -> dict[str, Any]:
    """{name: `fact`'s value} for each declared container (none without an engine)."""
    if spec["engine"] == "none":
        return {}
    return {name: read(fact, engine=spec["engine"], container=name) for name in spec["containers"]}


def _oom(spec: Spec, read: Read) -> Iterator[Finding]:
    fix = "raise the memory limit or lower what each process holds (num_workers x in-RAM data)"
    containers, host = container_reads(spec, read, ContainerInspect), read(CgroupMemory)
    for name, found in containers.items():
        kills = found["oom_kill"]
        main = ((found["inspect"] or {}).get("State") or {}).get("OOMKilled") is True
        if kills or main:
            actual = [f"oom_kill {kills} in its cgroup"] if kills else []
            actual += ["its main process was OOM-killed (State.OOMKilled)"] if main else []
            yield _finding(
                "container.oom_kill",
                f"the kernel OOM-killed processes in container {name}: they die as a bare Killed",
                "oom_kill 0",
                "; ".join(actual),
                f"{fix} for {name}",
            )
    kills = host["oom_kill"]
    if kills:
        yield _finding(
            "host.oom_kill",
            "the kernel OOM-killed processes in the cgroup this login sees as its root "
            "(a rented pod's own memory limit, or the whole host)",
            "oom_kill 0",
            f"oom_kill {kills}",
            fix,
        )


def _leaks(_spec: Spec, read: Read) -> Iterator[Finding]:
    cgroup = read(CgroupLeaks)
    thresholds = rules()["thresholds"]
    counted = cgroup["count"]
    level = counted and _level(counted["count"], thresholds["cgroups"])
    if counted and level:
        dying = f", {counted['dying']} of them dying" if counted["dying"] is not None else ""
        yield _finding(
            "host.cgroup_leak",
            "the host holds too many cgroups: a leak slows every container start",
            f"<= {thresholds['cgroups']['warn']} cgroups",
            f"{counted['count']} cgroups{dying} ({counted['source']})",
            "find what creates cgroups without removing them (crash-looping pods or units)",
            severity=level,
        )
    percpu = cgroup["percpu"]
    size = percpu["bytes"]
    level = size is not None and _level(size, thresholds["percpu_gb"], _GB)
    if size is not None and level:
        yield _finding(
            "host.percpu_memory",
            "per-cpu kernel memory is large: memory cgroups are leaking (dying memcgs)",
            f"<= {thresholds['percpu_gb']['warn']} GB",
            f"{size / _GB:.1f} GB ({percpu['source']})",
            "look for deleted cgroups still charged (cgroup.stat nr_dying_descendants)",
            severity=level,
        )


def _inside(path: str, directories: Sequence[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in directories)


def _where(found: Mapping[str, Any] | None, report: Mapping[str, Any]) -> str | None:
    """Why a module does not count as the environment's own, or None when it does."""
    if found is None:
        return "not found"
    if "error" in found:
        return f"find_spec failed: {found['error']}"
    origin, locations = found["origin"], found["locations"]
    places = report["site"] + report["stdlib"]
    if origin is not None:
        path = os.path.dirname(origin) if os.path.basename(origin) == "__init__.py" else origin
        return None if _inside(path, places) else f"from {path}"
    if not locations:
        return None  # built in or frozen: part of the interpreter
    outside = [p for p in locations if not _inside(p, places)]
    return f"a directory without __init__.py: {', '.join(outside)}" if outside else None


def import_reads(spec: Spec, read: Read) -> dict[str, Any]:
    """{checkout: its environment's import report} for each repo declaring `python.imports`."""
    return {
        path: read(EnvImports, checkout=path, venv=repo["python"]["venv"],
                   modules=list(repo["python"]["imports"]))
        for path, repo in spec["repos"].items()
        if (repo.get("python") or {}).get("imports")
    }  # fmt: skip


def _imports(spec: Spec, read: Read) -> Iterator[Finding]:
    for path, entry in import_reads(spec, read).items():
        repo = spec["repos"][path]
        wanted = repo["python"]["imports"]
        if entry["refused"]:
            yield _finding(
                "env.imports_unchecked",
                f"the imports of {path} were not checked: gpurig runs an environment's python "
                "only as the one account that can change it",
                "the checkout and its environment changeable by one account",
                entry["refused"],
                f"{path} and {repo['python']['venv']}, and the directories above them",
            )
            continue
        if entry["report"] is None and entry["error"] is None:
            continue  # no environment to ask: repo.env reports it missing
        fix = (
            f"add the package to {repo['python']['lockfile']} (or rename the directory that "
            f"shadows it in {path})"
        )
        if entry["error"]:
            actual = f"{entry['python']}: {entry['error']}"
            bad = {name: "not checked" for name in wanted}
        else:
            report = entry["report"]
            found = {
                name: _where(report["modules"][name], report)
                if name in report["modules"]
                else "not reported by the environment's python"
                for name in wanted
            }
            bad = {name: why for name, why in found.items() if why}
            actual = "; ".join(f"{name}: {why}" for name, why in bad.items())
        if bad:
            yield _finding(
                "env.imports",
                f"{', '.join(bad)} do not import from the environment of {path}",
                f"each of {', '.join(wanted)} from the environment's site-packages",
                actual,
                fix,
            )


RULES = (_oom, _leaks, _imports)


def check(spec: Spec, read: Read) -> list[Finding]:
    """Every node health finding for one host's spec and facts."""
    return [finding for rule in RULES for finding in rule(spec, read)]
