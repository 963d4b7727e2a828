"""Parsers for the interconnect between a host's GPUs: NVSwitch SXid kernel-log lines, tasks
hung in the kernel (khungtaskd's reports), and PCIe ACS controls from `lspci -vvv`. Pure
functions over text, tested on recordings from real machines (tests/fixtures/gpu); the
markers they match by live in gpurig/data/interconnect.yaml with their sources.
"""

from __future__ import annotations

import re
from functools import cache

from gpurig.data.tables import table
from gpurig.named_tuple import NamedTuple
from gpurig.read.gpu_parse import kernel_message, kernel_stamp
from gpurig.spec.pattern import lazy


class SxidEvent(NamedTuple):
    """One `nvidia-nvswitchN: SXid (PCI:...): CODE, ...` kernel log line."""

    sxid: int
    switch: str
    pci: str
    message: str
    at: float | None = None  # seconds since boot (gpu_parse.kernel_stamp)


# 'nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up'; one event
# logs several lines with one code (its severity, engine instance and data words).
_SXID_RE = lazy(
    r"(?P<switch>nvidia-nvswitch\d+): SXid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): "
    r"(?P<sxid>\d+), (?P<msg>.*)$"
)


def parse_sxid_lines(text: str) -> list[SxidEvent]:
    """SXid lines from kernel log text in any of dmesg's and journalctl's prefixes: messages
    that start with 'nvidia-nvswitchN: SXid (' (gpu_parse.kernel_message)."""
    events = []
    for line in text.splitlines():
        match = _SXID_RE.match(kernel_message(line)) if ": SXid (" in line else None
        if match:
            sxid, msg = int(match["sxid"]), match["msg"].rstrip()
            events.append(SxidEvent(sxid, match["switch"], match["pci"], msg, kernel_stamp(line)))
    return events


def sxid_severity_word(message: str) -> str | None:
    """'Fatal' or 'Non-fatal' where the driver logged one first in the line, else None."""
    word = message.split(",", 1)[0].strip()
    return word if word in ("Fatal", "Non-fatal") else None


class HungTask(NamedTuple):
    """One khungtaskd report: the task, its pid, how long it was blocked, and the report's
    lines (the message, its state and call trace) as logged."""

    task: str
    pid: int
    seconds: int
    lines: list[str]
    at: float | None = None  # seconds since boot of its first line (gpu_parse.kernel_stamp)

    @property
    def gpu_lines(self) -> list[str]:
        """The report's lines naming the NVIDIA driver or NCCL (a frame, the task's name):
        none when the task is not the GPU's."""
        names_gpu = _gpu_markers()
        return [line for line in self.lines if names_gpu.search(line)]


@cache
def _gpu_markers() -> re.Pattern[str]:
    """The hung-task markers of gpurig/data/interconnect.yaml as one pattern."""
    markers = table("interconnect.yaml")["hung_task"]["markers"]
    return re.compile("|".join(f"(?:{m})" for m in markers), re.I)


# 'INFO: task nvc:[driver]:5403 blocked for more than 120 seconds.' (a task name may hold ':').
_HUNG_RE = lazy(r"INFO: task (?P<task>.+):(?P<pid>\d+) blocked for more than (?P<s>\d+) seconds")
# The same line as a sed basic regular expression, for the kernel-log read's filter.
HUNG_TASK_SED = "INFO: task .* blocked for more than"


def hung_task_lines() -> int:
    """How many lines after its 'INFO: task' line a hung-task report may take."""
    return int(table("interconnect.yaml")["hung_task"]["lines_after"])


def parse_hung_tasks(text: str) -> list[HungTask]:
    """Every hung-task report in kernel log text, each with the lines that follow it up to the
    next report (at most `hung_task.lines_after`, gpurig/data/interconnect.yaml); a report is
    a message that starts with 'INFO: task ' (gpu_parse.kernel_message)."""
    limit = hung_task_lines()
    tasks: list[HungTask] = []
    following = 0
    for line in text.splitlines():
        match = _HUNG_RE.match(kernel_message(line)) if "INFO: task " in line else None
        if match:
            tasks.append(HungTask(match["task"], int(match["pid"]), int(match["s"]), [line],
                                  kernel_stamp(line)))  # fmt: skip
            following = limit
        elif tasks and following > 0:
            tasks[-1].lines.append(line)
            following -= 1
    return tasks


class AcsControl(NamedTuple):
    """One `ACSCtl:` line of `lspci -vvv`: the device it belongs to (its header line, None when
    the text has only the ACSCtl lines, as `lspci -vvv | grep ACSCtl` prints them), which
    controls are on, and the GPUs and RDMA NICs on the buses below it (its `Bus:` line's
    secondary to subordinate; None where that line was not read)."""

    device: str | None
    enabled: list[str]
    below: list[str] | None = None


# A device's header line starts at the first column: '0000:03:00.0 PCI bridge: ...' (with -D)
# or '03:00.0 PCI bridge: ...'; everything of that device is indented below it.
_DEVICE_RE = lazy(
    r"(?:(?P<domain>[0-9a-fA-F]{4}):)?(?P<bus>[0-9a-fA-F]{2}):[0-9a-fA-F]{2}\.[0-7] (?P<what>\S.*)"
)
_ACSCTL_RE = lazy(r"^\s+ACSCtl:\s*(?P<flags>.*)$")
# A bridge's buses (pciutils lspci.c show_htype1/2): '\tBus: primary=00, secondary=01,
# subordinate=04, sec-latency=0'.
_BUS_RE = lazy(r"^\s+Bus: primary=[0-9a-fA-F]+, secondary=(?P<sec>[0-9a-fA-F]+), "
                     r"subordinate=(?P<sub>[0-9a-fA-F]+)")  # fmt: skip


def is_peer(what: str) -> bool:
    """Whether a device, by the text after its address in `lspci`, is a GPU or an RDMA NIC:
    a peer-to-peer end (gpurig/data/interconnect.yaml `acs_peer_devices`)."""
    return any(
        re.match(pattern, what) for pattern in table("interconnect.yaml")["acs_peer_devices"]
    )


def parse_acs_controls(text: str) -> tuple[list[AcsControl], list[str]]:
    """Each ACSCtl line of `lspci -vvv` output (whole, or only its device, Bus and ACSCtl lines)
    with the controls it shows on ('SrcValid+') and the peers below its bridge, and every peer
    device's header line. Capabilities lspci may not read (not root: '<access denied>') print no
    ACSCtl line: nothing is reported, never 'disabled'."""
    devices: list[tuple[str, int, str]] = []  # (domain, bus, header) of every device
    found: list[tuple[str | None, list[str], tuple[str, int, int] | None]] = []
    device: str | None = None
    domain, buses = "0000", None
    for line in text.splitlines():
        head = _DEVICE_RE.match(line)
        if head:
            device, domain, buses = line.strip(), (head["domain"] or "0000").lower(), None
            devices.append((domain, int(head["bus"], 16), head["what"]))
            continue
        bus = _BUS_RE.match(line) if device is not None else None
        if bus:
            buses = (domain, int(bus["sec"], 16), int(bus["sub"], 16))
            continue
        match = _ACSCTL_RE.match(line)
        if match:
            flags = re.findall(r"(\w+)([+-])", match["flags"])
            found.append((device, [name for name, on in flags if on == "+"], buses))
    peers = [(d, b, what) for d, b, what in devices if is_peer(what)]
    controls = [
        AcsControl(
            device,
            enabled,
            None if span is None else
            [what for d, b, what in peers if d == span[0] and span[1] <= b <= span[2]],
        )
        for device, enabled, span in found
    ]  # fmt: skip
    return controls, [what for _, _, what in peers]


def acs_redirecting(controls: list[AcsControl]) -> list[AcsControl]:
    """The ACSCtl lines with a control on that NCCL's troubleshooting guide says breaks or
    slows GPU peer-to-peer (gpurig/data/interconnect.yaml `acs_enabled_controls`), on bridges
    where the header says which device it is, with a GPU or RDMA NIC below them (a bridge whose
    buses were not read is counted: nothing says it is off the path)."""
    wanted = set(table("interconnect.yaml")["acs_enabled_controls"])
    return [
        c
        for c in controls
        if wanted & set(c.enabled)
        and (c.device is None or "bridge" in c.device.lower())
        and (c.below is None or c.below)
    ]
