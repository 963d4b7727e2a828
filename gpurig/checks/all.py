"""Checks of what the converge cannot change, one home per domain:

- host and node (gpurig/checks/node.py): reaching and reading the host, root, disk and inode
  headroom, a container's /dev/shm against memory, login shells, OOM kills, cgroup leaks,
  imports;
- containers' running state (gpurig/checks/container.py): crashes, OOM kills, the engine API;
- GPU (gpurig/checks/gpu.py): presence and health;
- the interconnect between GPUs (gpurig/checks/interconnect.py): NVSwitch SXid, hung tasks in
  the GPU driver, PCIe ACS;
- compatibility (gpurig/checks/compat.py): driver, kernel module, CUDA, torch arch lists;
- fabric (gpurig/checks/fabric.py): RDMA ports, their error counters, the fabric's MTU and
  the declared containers' NCCL interfaces and HCAs;
- over time (gpurig/checks/over_time.py): what a node contract judges against its earlier runs
  (fabric counter rates and flaps, a reboot-asking Xid or SXid back after the reboot); its ids
  are listed here, its judging is the node contracts' (gpurig/node/over_time.py).

Each rule is pure `rule(spec, read) -> [Finding]`: it reads the facts it judges through the
same `read(FactClass, **kwargs)` as the plans (the host's one-round-trip snapshot, or a Recorder
listing what a spec needs), by the spec alone, before it looks at what it read. Findings are
built from gpurig/data/checks.yaml (gpurig.checks.rules); what the converge manages is judged by its
plans (gpurig.plans), never here. Onboarding's preflight runs the same `check()`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gpurig.checks import compat, compat_checks, over_time
from gpurig.checks import container as container_checks
from gpurig.checks import fabric as fabric_checks
from gpurig.checks import gpu as gpu_checks
from gpurig.checks import interconnect as interconnect_checks
from gpurig.checks import node as node_checks
from gpurig.checks.rules import one_per_cause
from gpurig.facts.round_trip import Unreadable
from gpurig.plans import CHANGE_IDS
from gpurig.spec.finding import Finding

Read = Callable[..., Any]
Spec = Mapping[str, Any]
Rule = Callable[[Spec, Read], Iterator[Finding]]

# What odd host output raises while it is judged (a parser's refusal): that part becomes
# `state.unreadable`. A KeyError or TypeError is a bug in gpurig and fails its tests.
ODD_OUTPUT = (Unreadable, ValueError)

# Every id a check can carry, by domain (tests check each has a case that makes it fire, and
# that the table has exactly these rows besides the fleet view's).
CHECK_IDS = (
    *node_checks.IDS, *container_checks.IDS, *gpu_checks.IDS, *interconnect_checks.IDS,
    *compat.IDS, *fabric_checks.IDS, *over_time.IDS,
)  # fmt: skip
# Findings that say the host was not read, or part of it could not be: its checks did not all
# run, so the run did not succeed there (the textfile's last_run_success 0) and no 0 is
# claimed for it.
NOT_READ = frozenset(
    {"host.unreachable", "host.key_changed", "host.sudo_password", "state.unreadable"}
)


def known_ids() -> tuple[str, ...]:
    """Every finding id a drift run can report, from the lists the plans' and checks' tests
    hold complete (each id there has a case that makes it fire)."""
    return tuple(sorted({*CHANGE_IDS, *CHECK_IDS}))


def rules(containers: bool = True, imports: bool = True) -> tuple[Rule, ...]:
    """The rules a read judges: all of them, or without those that look into declared
    containers or environments (a node contract's mode leaves them out for time)."""
    return (
        *node_checks.RULES,
        *(node_checks.IMPORTS if imports else ()),
        *container_checks.RULES,
        *(container_checks.CONTAINER_RULES if containers else ()),
        *gpu_checks.RULES,
        *interconnect_checks.RULES,
        *compat_checks.RULES,
        *(compat_checks.CONTAINER_RULES if containers else ()),
        *fabric_checks.RULES,
    )


def check(spec: Spec, read: Read, containers: bool = True, imports: bool = True) -> list[Finding]:
    """Every check's finding for one reachable host, one per cause. A rule that meets a fact
    the host's output made unreadable gives one `state.unreadable`; the others still judge."""
    findings: list[Finding] = []
    for rule in rules(containers, imports):
        try:
            findings += list(rule(spec, read))
        except ODD_OUTPUT as exc:
            findings.append(node_checks.unreadable("checks", exc))
    return one_per_cause(findings)
