"""Fleet view: group hosts by what must match across a multi-node job, flag the outliers.

Mixed drivers, CUDA, kernels, toolkits, images or code are what hang NCCL jobs across nodes.
Pure functions over per-host facts (plain strings, extracted from each host's facts by the
caller); renderers return text or dicts for gpurig/report/render.py to place.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

from gpurig.checks.rules import found
from gpurig.spec.finding import Finding, as_dict
from gpurig.spec.textsafe import visible
from gpurig.spec.words import counted

# Fleet dimensions, in report order, with the words a finding uses for them.
DIMENSIONS: dict[str, str] = {
    "driver": "NVIDIA driver",
    "cuda": "CUDA",
    "kernel": "kernel",
    "toolkit": "NVIDIA Container Toolkit",
    "image": "container image",
    "code": "deployed code",
    # The fabric (gpurig/checks/fabric.py fleet_pieces): one odd host hangs or slows a job.
    "mtu": "fabric MTU",
    "port_rate": "RDMA port rate",
    "hca": "RDMA device model",
    "hca_firmware": "RDMA device firmware",
}
HostFacts = Mapping[str, Optional[Union[str, Mapping[str, str]]]]
IDS = tuple(f"fleet.mixed_{dim}" for dim in DIMENSIONS)


@dataclass(frozen=True)
class Group:
    """One value of one dimension and the hosts that have it."""

    dimension: str  # "driver", or "image:skyrl-train" for one container's image
    value: str
    hosts: list[str]


def _columns(hosts: Mapping[str, HostFacts]) -> dict[str, dict[str, str]]:
    """{column: {host: value}}; image and code may map a container/repo name to its value."""
    columns: dict[str, dict[str, str]] = {}
    for host, facts in sorted(hosts.items()):
        for dim in DIMENSIONS:
            value = facts.get(dim)
            items = value.items() if isinstance(value, Mapping) else [("", value)]
            for name, item in items:
                if item:
                    columns.setdefault(f"{dim}:{name}" if name else dim, {})[host] = str(item)
    return columns


def groups(hosts: Mapping[str, HostFacts]) -> list[Group]:
    """Every (dimension, value) with its hosts, largest group first within a dimension."""
    result = []
    for column, values in _columns(hosts).items():
        by_value: dict[str, list[str]] = {}
        for host, value in values.items():
            by_value.setdefault(value, []).append(host)
        ranked = sorted(by_value.items(), key=lambda item: (-len(item[1]), item[0]))
        result += [Group(column, value, members) for value, members in ranked]
    return result


def findings(hosts: Mapping[str, HostFacts]) -> list[Finding]:
    """A `fleet.mixed_<dimension>` warning per dimension whose hosts disagree."""
    result = []
    for column, values in _columns(hosts).items():
        counts = Counter(values.values())
        if len(counts) < 2:
            continue
        dim, _, name = column.partition(":")
        majority = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[0][0]
        outliers = sorted(f"{h}: {v}" for h, v in values.items() if v != majority)
        what = DIMENSIONS[dim] + (f" of {name}" if name else "")
        result.append(
            found(
                f"fleet.mixed_{dim}",
                what,
                f"{len(counts)} different {what} versions across {len(values)} hosts",
                f"{majority} (on {counted(counts[majority], 'host')})",
                "; ".join(outliers),
                "converge the outliers to the same version before running multi-node jobs",
            )
        )
    return result


def to_json(hosts: Mapping[str, HostFacts]) -> dict[str, Any]:
    """The fleet view as JSON-ready data: groups and findings."""
    return {
        "groups": [vars(g) for g in groups(hosts)],
        "findings": [as_dict(f) for f in findings(hosts)],
    }


def render_table(hosts: Mapping[str, HostFacts]) -> str:
    """Plain-text table: dimension, value, host count, hosts (outliers visible at a glance)."""
    rows = [("DIMENSION", "VALUE", "HOSTS", "")]
    rows += [(g.dimension, g.value, str(len(g.hosts)), ", ".join(g.hosts)) for g in groups(hosts)]
    widths = [max(len(visible(row[i])) for row in rows) for i in range(3)]
    return "\n".join(
        "  ".join(visible(cell).ljust(width) for cell, width in zip(row[:3], widths))
        + f"  {visible(row[3])}".rstrip()
        for row in rows
    )


def render_markdown(hosts: Mapping[str, HostFacts]) -> str:
    """Markdown table for a CI job summary; host output is escaped, never markup."""
    lines = ["| Dimension | Value | Hosts |", "| --- | --- | --- |"]
    lines += [
        f"| {_md(g.dimension)} | `{_code(g.value)}` | {_md(', '.join(g.hosts))} ({len(g.hosts)}) |"
        for g in groups(hosts)
    ]
    return "\n".join(lines)


def _md(text: str) -> str:
    return "".join(f"\\{c}" if c in "\\`*_{}[]<>()#+-.!|" else c for c in visible(text))


def _code(text: str) -> str:
    return visible(text).replace("`", "'").replace("|", "\\|")
