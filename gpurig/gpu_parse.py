"""Parsers for what GPU hosts print: nvidia-smi, /proc/driver/nvidia/version, kernel Xid lines,
torch's arch list. Pure functions over text, so the probe's output can be tested on recordings
from real machines (tests/fixtures/gpu) where CI has no GPU.
"""

from __future__ import annotations

import ast
import csv
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

# Fields the probe asks nvidia-smi for; every one appears in the recorded query-gpu captures.
QUERY_GPU_FIELDS: tuple[str, ...] = (
    "index",
    "pci.bus_id",
    "name",
    "uuid",
    "driver_version",
    "compute_cap",
    "memory.used",
    "memory.total",
    "mig.mode.current",
)
QUERY_GPU_COMMAND = (
    f"nvidia-smi --query-gpu={','.join(QUERY_GPU_FIELDS)} --format=csv,noheader,nounits"
)

_NA = {"[N/A]", "N/A", "[Not Supported]"}
# A header cell: a field name, optionally with its unit ('memory.used [MiB]'); values never
# look like this (they start with a digit, a capital, '[' or are empty).
_FIELD_RE = re.compile(r"[a-z][A-Za-z0-9_.]*(?: \[.+\])?")


@dataclass(frozen=True)
class KernelModule:
    """The loaded NVIDIA kernel module: its version and whether it is the open one."""

    version: str
    open: bool


@dataclass(frozen=True)
class SmiVersion:
    """`nvidia-smi --version`: 610+ drivers call the driver 'KMD' and the CUDA 'CUDA UMD'."""

    smi: str
    nvml: str
    driver: str
    cuda: str


@dataclass(frozen=True)
class SmiHeader:
    """Versions in the banner of nvidia-smi's default table."""

    smi: str
    driver: str
    cuda: str


@dataclass(frozen=True)
class XidEvent:
    """One `NVRM: Xid` kernel log line."""

    xid: int
    pci: str
    message: str


@dataclass(frozen=True)
class TorchCapabilityWarning:
    """torch's "GPU with CUDA capability sm_XY is not compatible" warning."""

    gpu: str
    capability: str
    supported: list[str]


def parse_proc_driver_version(text: str) -> KernelModule:
    """Parse /proc/driver/nvidia/version (proprietary and open module line shapes)."""
    match = re.search(
        r"NVRM version: NVIDIA UNIX (?P<pre>.*?)Kernel Module(?: for \S+)?"
        r"\s+(?P<ver>\d+(?:\.\d+)+)",
        text,
    )
    if match is None:
        raise ValueError("no 'NVRM version: NVIDIA UNIX ... Kernel Module' line")
    return KernelModule(match["ver"], "Open" in match["pre"].split())


def _strip_unit(header: str) -> tuple[str, str]:
    """'memory.used [MiB]' -> ('memory.used', 'MiB'); a header without units -> (header, '')."""
    match = re.fullmatch(r"(.+?) \[(.+)\]", header)
    return (match[1], match[2]) if match else (header, "")


def parse_query_gpu_csv(
    text: str, fields: tuple[str, ...] = QUERY_GPU_FIELDS
) -> list[dict[str, str | None]]:
    """Parse `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`, one dict per GPU.

    With a header its names (units stripped) are the keys and units are stripped from values;
    without one, `fields` names the columns. N/A values become None. nvidia-smi's own refusal
    ('Field "x" is not a valid field to query', from builds that predate a field) raises.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and re.match(r'Field ".*" is not a valid field to query', lines[0]):
        raise ValueError(f"nvidia-smi refused the query: {lines[0]}")
    rows = list(csv.reader(lines, skipinitialspace=True))
    if rows and all(_FIELD_RE.fullmatch(cell) for cell in rows[0]):
        header = [_strip_unit(cell) for cell in rows.pop(0)]
    else:
        header = [(name, "") for name in fields]
    gpus = []
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"expected {len(header)} columns, got {len(row)}: {row!r}")
        gpu: dict[str, str | None] = {}
        for (name, unit), value in zip(header, row, strict=True):
            if unit and value.endswith(f" {unit}"):
                value = value[: -len(unit) - 1]
            gpu[name] = None if value in _NA else value
        gpus.append(gpu)
    return gpus


def parse_smi_version(text: str) -> SmiVersion:
    """Parse `nvidia-smi --version`, preferring the 610+ 'KMD'/'CUDA UMD' lines."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            values[key.strip().lower()] = value.strip()
    try:
        return SmiVersion(
            smi=values["nvidia-smi version"],
            nvml=values["nvml version"],
            driver=values.get("kmd version") or values["driver version"],
            cuda=values.get("cuda umd version") or values["cuda version"],
        )
    except KeyError as exc:
        raise ValueError(f"nvidia-smi --version output lacks {exc}") from exc


def parse_smi_header(text: str) -> SmiHeader:
    """Parse the banner of nvidia-smi's default table ('Driver Version' or 610's 'KMD Version')."""
    match = re.search(
        r"NVIDIA-SMI (\S+)\s+(?:Driver|KMD) Version: (\S+)\s+CUDA (?:UMD )?Version: (\S+)", text
    )
    if match is None:
        raise ValueError("no 'NVIDIA-SMI ... Version: ... CUDA Version: ...' banner")
    return SmiHeader(*match.groups())


def parse_nvml_mismatch(text: str) -> str | None:
    """NVML library version from a 'Driver/library version mismatch' failure, else None.

    The version is '' when the failure is printed without its 'NVML library version' line.
    """
    if "Driver/library version mismatch" not in text:
        return None
    match = re.search(r"NVML library version: (\S+)", text)
    return match[1] if match else ""


def parse_throttle_reasons(xml_text: str) -> dict[str, list[str]]:
    """Active clock throttle/event reasons per GPU (PCI id) from `nvidia-smi -q -x`.

    Drivers before 530-ish write <clocks_throttle_reasons>, later ones <clocks_event_reasons>;
    both are read, and names lose their prefix ('gpu_idle', 'sw_power_cap').
    """
    root = ET.fromstring(xml_text.lstrip())
    result = {}
    for gpu in root.iter("gpu"):
        active = []
        for schema in ("clocks_event_reasons", "clocks_throttle_reasons"):
            block = gpu.find(schema)
            if block is None:
                continue
            prefix = schema.removesuffix("s") + "_"
            active += [
                reason.tag.removeprefix(prefix)
                for reason in block
                if (reason.text or "").strip() == "Active"
            ]
        result[gpu.get("id", "")] = active
    return result


_XID_RE = re.compile(r"NVRM: Xid \(PCI:(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>\d+), (?P<msg>.*)$")


def parse_xid_lines(text: str) -> list[XidEvent]:
    """Xid events from kernel log text: dmesg, dmesg -T, --time-format=iso, journalctl -k."""
    events = []
    for line in text.splitlines():
        match = _XID_RE.search(line)
        if match:
            events.append(XidEvent(int(match["xid"]), match["pci"], match["msg"].rstrip()))
    return events


def parse_torch_arch_list(text: str) -> list[str]:
    """Parse `print(torch.cuda.get_arch_list())` output (a Python list repr)."""
    for line in reversed(text.splitlines()):
        if line.strip().startswith("["):
            value = ast.literal_eval(line.strip())
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return value
    raise ValueError("no arch list like ['sm_80', 'sm_90'] in the text")


def parse_torch_capability_warning(text: str) -> TorchCapabilityWarning | None:
    """torch's warning that the GPU's capability is missing from its build, else None."""
    # Lines may carry a journald prefix ('Oct 04 13:19:39 llm unit[394]: ').
    gpu = re.search(
        r"^(?:.*?\[\d+\]: )?(.+?) with CUDA capability (sm_\d+) is not compatible", text, re.M
    )
    supported = re.search(r"supports CUDA capabilities ((?:sm_\d+\w* ?)+)", text)
    if gpu is None or supported is None:
        return None
    return TorchCapabilityWarning(gpu[1], gpu[2], supported[1].split())


def has_no_kernel_image_error(text: str) -> bool:
    """Did CUDA report that no compiled kernel fits this GPU?"""
    return "no kernel image is available for execution on the device" in text


# Volatile (since the driver loaded) uncorrectable ECC counters, in each XML schema generation:
# 450-era <double_bit><total>, later <dram_uncorrectable> and the <sram_uncorrectable*> pair.
_ECC_UNCORRECTABLE = (
    "double_bit/total",
    "dram_uncorrectable",
    "sram_uncorrectable",
    "sram_uncorrectable_parity",
    "sram_uncorrectable_secded",
)


def parse_ecc_uncorrectable(xml_text: str) -> dict[str, int | None]:
    """Volatile uncorrectable ECC errors per GPU (PCI id) from `nvidia-smi -q -x`.

    None where the GPU reports every counter N/A (ECC unsupported or disabled): no ECC is not
    the same as zero errors.
    """
    root = ET.fromstring(xml_text.lstrip())
    result: dict[str, int | None] = {}
    for gpu in root.iter("gpu"):
        values = [
            (node.text or "").strip()
            for path in _ECC_UNCORRECTABLE
            for node in gpu.findall(f"ecc_errors/volatile/{path}")
        ]
        counts = [int(v) for v in values if v.isdigit()]
        result[gpu.get("id", "")] = sum(counts) if counts else None
    return result
