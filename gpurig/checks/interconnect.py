"""Checks of the interconnect between a host's GPUs that the converge cannot fix: NVSwitch SXid
events, tasks hung in the NVIDIA driver or NCCL, and PCIe ACS on the bridges GPUs talk
through. Pure rules `rule(spec, read) -> [Finding]` over the kernel-log read
(facts/gpurig_nvidia.py KernelLog) and the ACS read (facts/gpurig_interconnect.py); the SXid
table, the hung-task markers and the ACS controls, with their sources, are in
gpurig/data/interconnect.yaml, the ids' rows in gpurig/data/checks.yaml.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gpurig.checks.gpu import _log as log_excerpt
from gpurig.checks.rules import ByInput, by_input, found
from gpurig.data.tables import table
from gpurig.facts.gpurig_interconnect import PcieAcs
from gpurig.facts.gpurig_nvidia import KernelLog, NvidiaGpus
from gpurig.read.interconnect_parse import AcsControl, acs_redirecting, sxid_severity_word
from gpurig.spec.finding import Finding
from gpurig.spec.words import counted

Read = Callable[..., Any]
Spec = Mapping[str, Any]

IDS = ("gpu.sxid", "gpu.hung_task", "pcie.acs_enabled")


def sxid_class(sxid: int, word: str) -> tuple[str, str]:
    """(name, category) of one SXid: the table's, else by the word the driver logged with it
    ('Fatal'/'Non-fatal'), else an unknown code, judged fatal (reboot)."""
    data = table("interconnect.yaml")
    if sxid in data["sxids"]:
        name, category = data["sxids"][sxid]
        return name, category
    return "not in the table", data["unlisted"].get(word, "fatal")


def sxid_by_input() -> list[ByInput]:
    """gpu.sxid's severity and remediation per SXid, judged as _sxids judges them: the table's
    codes by their category, a code not in it by the word the driver logged with it."""
    data = table("interconnect.yaml")
    codes: dict[str, list[str]] = {}
    for sxid in sorted(data["sxids"]):
        codes.setdefault(sxid_class(sxid, "")[1], []).append(str(sxid))
    for word in (*data["unlisted"], ""):
        said = f"logged {word}" if word else "logged with neither word"
        codes.setdefault(sxid_class(0, word)[1], []).append(f"a code not in the table {said}")
    judged = data["sxid_categories"]
    return by_input(
        ByInput(judged[c]["severity"], judged[c]["remediation"], f"{c}: SXid {', '.join(codes[c])}")
        for c in codes
    )


def _sxids(_spec: Spec, read: Read) -> Iterator[Finding]:
    by_code: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for event in read(KernelLog).get("sxids") or []:
        by_code.setdefault((event["sxid"], event["pci"]), []).append(event)
    for (sxid, pci), events in sorted(by_code.items()):
        # One event logs several lines (severity, engine instance, data): the first word wins.
        words = [sxid_severity_word(e["message"]) for e in events]
        name, category = sxid_class(sxid, next((w for w in words if w), ""))
        lines = [f"{e['switch']}: SXid ({pci}): {sxid}, {e['message']}" for e in events]
        judged = table("interconnect.yaml")["sxid_categories"][category]
        yield found(
            "gpu.sxid",
            f"NVSwitch {pci}",
            f"NVSwitch SXid {sxid} ({name}, {category}) logged {counted(len(lines), 'time')} "
            "since boot",
            "no SXid events",
            log_excerpt(lines),
            f"NVIDIA's Fabric Manager guide: SXid {sxid} is {category}",
            severity=judged["severity"],
            remediation=judged["remediation"],
        )


def _hung_tasks(_spec: Spec, read: Read) -> Iterator[Finding]:
    for task in read(KernelLog).get("hung_tasks") or []:
        if not task["gpu_lines"]:
            continue
        yield found(
            "gpu.hung_task",
            f"task {task['task']} (pid {task['pid']})",
            f"task {task['task']} hung in the kernel for more than {task['seconds']} s in the "
            "NVIDIA driver or NCCL",
            "no task blocked in the GPU driver",
            log_excerpt([task["lines"][0].strip(), *(line.strip() for line in task["gpu_lines"])]),
            "a task in uninterruptible sleep (D) cannot be killed; the GPU it waits on is wedged",
        )


def _where(control: AcsControl) -> str:
    where = control.device or "a bridge (lspci printed no device line)"
    return f"{where} (above {'; '.join(control.below)})" if control.below else where


def _acs(_spec: Spec, read: Read) -> Iterator[Finding]:
    gpu, acs = read(NvidiaGpus), read(PcieAcs)
    gpus = len(gpu.get("listing") or [])
    # The ends of peer-to-peer: lspci's GPUs and RDMA NICs where it printed device lines.
    peers = max(gpus, len(acs.get("peers") or []))
    controls = [AcsControl(c["device"], c["enabled"], c.get("below")) for c in acs["controls"]]
    enabled = acs_redirecting(controls)
    if peers < 2 or not enabled:
        return
    shown = [f"{_where(c)}: {' '.join(f'{n}+' for n in c.enabled)}" for c in enabled]
    yield found(
        "pcie.acs_enabled",
        "PCIe bridges",
        f"ACS is on at {counted(len(enabled), 'PCIe bridge')} on the path of this host's "
        f"{peers} GPUs and RDMA NICs: peer-to-peer traffic between them may be redirected "
        "through the CPU or hang",
        "ACSCtl: SrcValid- ReqRedir- CmpltRedir- EgressCtrl- on the bridges between GPUs",
        log_excerpt(shown),
        "disable IO virtualization (VT-d/IOMMU) or ACS in the BIOS, or clear it on each bridge "
        "(setpci -s BDF ECAP_ACS+0x6.w=0000, again after every reboot)",
    )


RULES = (_sxids, _hung_tasks, _acs)
