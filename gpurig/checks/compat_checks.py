"""Compatibility checks on one host: the rules of gpurig/checks/compat.py (pure, and what offline
`gpurig compat` runs) applied to its loaded kernel module, its driver, the GPUs a job can be
given and each declared container's torch, read through the checks' reader (gpurig.checks.all).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gpurig.checks import compat
from gpurig.checks.gpu import job_capabilities
from gpurig.facts.gpurig_container import ContainerTorch
from gpurig.facts.gpurig_nvidia import NvidiaGpus
from gpurig.plans.containers import container_reads
from gpurig.spec.finding import Finding


def _driver(read: Callable[..., Any]) -> str | None:
    """The driver a host's torch builds are judged by. Where NVML refuses to start, its own
    finding (gpu.nvml_mismatch) names the mismatch, and the library version that will load
    after a reboot stands in."""
    gpu = read(NvidiaGpus)
    gpus = gpu["gpus"] or []
    return gpus[0].get("driver_version") if gpus else gpu["nvml_mismatch"]


def _module(_spec: Mapping[str, Any], read: Callable[..., Any]) -> Iterator[Finding]:
    """The loaded kernel module against the driver (a Jetson's module line names its L4T
    release, not a driver version)."""
    driver, module = _driver(read), read(NvidiaGpus)["kernel_module"]
    if driver and module and not module["l4t"]:
        yield from compat.check_kernel_module(driver, module["version"])


def _torch(spec: Mapping[str, Any], read: Callable[..., Any]) -> Iterator[Finding]:
    """Each container's torch (CUDA release, arch list) against the driver and every GPU a job
    can be given: a MIG slice is judged by its parent GPU's capability (it has none of its own)."""
    torches = container_reads(spec, read, ContainerTorch)
    driver = _driver(read) if torches else None
    if not driver:
        return
    capabilities = job_capabilities(read(NvidiaGpus))
    for name, torch in torches.items():
        if not (torch or {}).get("cuda"):
            continue
        for capability in capabilities or [None]:
            arches = torch.get("arch_list") if capability else None
            yield from compat.judge(
                driver, None, torch["cuda"], arches, capability, f"container {name}"
            )[1]


RULES = (_module,)
# What reads inside containers: a node contract's mode may leave it out for time.
CONTAINER_RULES = (_torch,)
