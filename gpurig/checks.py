"""Checks of what the converge cannot change, run over one host's probe: one home per domain.

- host and node (gpurig/node_checks.py): reaching and reading the host, root, disk and inode
  headroom, /dev/shm against memory, login shells, OOM kills, cgroup leaks, imports;
- containers' running state (gpurig/container_checks.py): crashes, OOM kills, the engine API;
- GPU (gpurig/gpu_checks.py): presence and health;
- compatibility (gpurig/compat.py): driver, kernel module, CUDA, torch arch lists.

Each builds its findings from gpurig/data/checks.yaml (gpurig.rules); what the converge
manages is judged by its plans (gpurig.plans), never here. Onboarding's preflight runs the
same `check()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpurig import compat, container_checks, gpu_checks, node_checks
from gpurig.finding import Finding
from gpurig.rules import one_per_cause

Probe = Mapping[str, Any]
Spec = Mapping[str, Any]

# Every id a check can carry, by domain (tests check each has a case that makes it fire, and
# that the table has exactly these rows besides the fleet view's).
CHECK_IDS = (*node_checks.IDS, *container_checks.IDS, *gpu_checks.IDS, *compat.IDS)


def check(spec: Spec, probe: Probe | None) -> list[Finding]:
    """Every check's finding for one reachable host, one per cause; a failed probe is one
    `probe.failed`."""
    if not probe or probe.get("error"):
        reason = (probe or {}).get("error") or "the probe printed nothing (timeout or shell error)"
        return [node_checks.probe_failed(reason)]
    return one_per_cause(
        [
            *node_checks.check(spec, probe),
            *container_checks.check(spec, probe),
            *gpu_checks.check(spec, probe.get("gpu") or {}),
            *compat.check(spec, probe),
        ]
    )
