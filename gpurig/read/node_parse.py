"""Parsers for the node facts' readings: cgroup counts, per-cpu memory, OOM kill counters and
where a declared environment's modules resolve.

Host output is untrusted: each parser takes exactly the shape the kernel (or gpurig's own
Python snippet) prints and raises ValueError on anything else, so a fact can keep the
reason instead of a guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from gpurig.spec.pattern import lazy

_COUNT = lazy(r"[0-9]+")
# A top-level module name: what a spec's `imports` may hold and what reaches the host's python.
MODULE_NAME = lazy(r"[A-Za-z_][A-Za-z0-9_]*")
_KB = 1024


def count(text: str | None) -> int | None:
    """A non-negative decimal integer as the kernel prints it; None for nothing printed."""
    if text is None or not text.strip():
        return None
    if not _COUNT.fullmatch(text.strip()):
        raise ValueError(f"not a count: {text.strip()[:40]!r}")
    return int(text.strip())


def parse_proc_cgroups(text: str) -> dict[str, int]:
    """`/proc/cgroups` as {controller: num_cgroups}, enabled controllers only.

    Columns: subsys_name, hierarchy, num_cgroups, enabled (kernel/cgroup/cgroup-v1.c,
    proc_cgroupstats_show); the header line starts with '#'.
    """
    counts: dict[str, int] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 4 or not all(_COUNT.fullmatch(f) for f in fields[1:]):
            raise ValueError(f"/proc/cgroups: unexpected line {line[:80]!r}")
        if fields[3] == "1":
            counts[fields[0]] = int(fields[2])
    return counts


def parse_flat_keyed(text: str, what: str) -> dict[str, int]:
    """A cgroup 'flat keyed' file (cgroup.stat, memory.stat): one `key value` per line."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, _, value = line.partition(" ")
        if not re.fullmatch(r"[a-z0-9_]+", key) or not _COUNT.fullmatch(value.strip()):
            raise ValueError(f"{what}: unexpected line {line[:80]!r}")
        values[key] = int(value)
    return values


def cgroup_count(proc_cgroups: str | None, stat: str | None) -> dict[str, Any] | None:
    """How many cgroups the host holds, dying ones included, and where that was read.

    cgroup v2: the root's cgroup.stat, 1 + nr_descendants + nr_dying_descendants (the count
    /proc/cgroups prints for the v2 tree, which newer kernels may not list at all). v1: the
    largest num_cgroups of /proc/cgroups' hierarchies. With both, the larger: inside a pod's
    cgroup namespace cgroup.stat covers the pod only, /proc/cgroups the whole node.
    """
    found = []
    if stat:
        values = parse_flat_keyed(stat, "cgroup.stat")
        live, dying = values.get("nr_descendants"), values.get("nr_dying_descendants")
        if live is None or dying is None:
            raise ValueError("cgroup.stat: no nr_descendants / nr_dying_descendants")
        found.append({"count": 1 + live + dying, "dying": dying, "source": "cgroup.stat"})
    counts = parse_proc_cgroups(proc_cgroups or "")
    if counts:
        controller = max(counts, key=lambda name: counts[name])
        source = f"/proc/cgroups {controller}"
        found.append({"count": counts[controller], "dying": None, "source": source})
    return max(found, key=lambda reading: reading["count"]) if found else None


def percpu_bytes(memory_stat_percpu: str | None, meminfo_percpu: str | None) -> dict[str, Any]:
    """Per-cpu kernel memory in bytes: the root memory.stat's `percpu` (v2), else /proc/meminfo's
    `Percpu: N kB` (every kernel since 4.16, any cgroup version)."""
    stat = count(memory_stat_percpu)
    if stat is not None:
        return {"bytes": stat, "source": "memory.stat percpu"}
    if meminfo_percpu is None or not meminfo_percpu.strip():
        return {"bytes": None, "source": None}
    match = re.fullmatch(r"([0-9]+) kB", meminfo_percpu.strip())
    if not match:
        raise ValueError(f"/proc/meminfo Percpu: unexpected value {meminfo_percpu[:40]!r}")
    return {"bytes": int(match[1]) * _KB, "source": "/proc/meminfo Percpu"}


def _strings(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what}: expected a list of paths")
    return value


def _module(name: str, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError(f"module {name}: expected an object")
    if set(value) == {"error"} and isinstance(value["error"], str):
        return {"error": value["error"]}
    origin = value.get("origin")
    if set(value) != {"origin", "locations"} or not (origin is None or isinstance(origin, str)):
        raise ValueError(f"module {name}: expected origin and locations")
    return {"origin": origin, "locations": _strings(value["locations"], f"module {name}")}


def parse_imports_report(text: str) -> dict[str, Any]:
    """The JSON the import check's snippet (facts/env_imports.sh) prints in the environment:
    its site-packages and stdlib directories and, per asked module, None (not found), an error,
    or origin/locations."""
    try:
        report = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(report, Mapping) or not isinstance(report.get("modules"), Mapping):
        raise ValueError("expected an object with modules")
    modules = {}
    for name, value in report["modules"].items():
        if not MODULE_NAME.fullmatch(name):
            raise ValueError(f"unexpected module name {name[:40]!r}")
        modules[name] = _module(name, value)
    python = report.get("python")
    return {
        "python": python if isinstance(python, str) else None,
        "site": _strings(report.get("site"), "site"),
        "stdlib": _strings(report.get("stdlib"), "stdlib"),
        "modules": modules,
    }
