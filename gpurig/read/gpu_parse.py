"""Parsers for what GPU hosts print: nvidia-smi, /proc/driver/nvidia/version, kernel Xid lines,
torch's arch list. Pure functions over text, so the GPU facts' outputs can be tested on recordings
from real machines (tests/fixtures/gpu) where CI has no GPU.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpurig.data.tables import table
from gpurig.named_tuple import NamedTuple
from gpurig.spec.pattern import lazy

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

# Fields the GPU query (facts.gpurig_nvidia.NvidiaGpus) asks nvidia-smi for, in its order: the
# query recorded on an H100 80GB VM (driver 580.159.04) as it runs (noheader, nounits: columns
# by position), so its one recording tests it as it is; fields past mig.mode.current are read
# by no rule yet.
QUERY_GPU_FIELDS: tuple[str, ...] = (
    "index",
    "pci.bus_id",
    "name",
    "uuid",
    "serial",
    "driver_version",
    "compute_cap",
    "memory.used",
    "memory.total",
    "mig.mode.current",
    "persistence_mode",
    "ecc.mode.current",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "temperature.gpu",
    "power.draw",
    "power.limit",
)
QUERY_GPU_COMMAND = (
    f"nvidia-smi --query-gpu={','.join(QUERY_GPU_FIELDS)} --format=csv,noheader,nounits"
)

_NA = {"[N/A]", "N/A", "[Not Supported]"}
# A header cell: a field name, optionally with its unit ('memory.used [MiB]'); values never
# look like this (they start with a digit, a capital, '[' or are empty).
_FIELD_RE = lazy(r"[a-z][A-Za-z0-9_.]*(?: \[.+\])?")


class KernelModule(NamedTuple):
    """The loaded NVIDIA kernel module: its version and whether it is the open one."""

    version: str
    open: bool


class SmiVersion(NamedTuple):
    """`nvidia-smi --version`: 610+ drivers call the driver 'KMD' and the CUDA 'CUDA UMD'."""

    smi: str
    nvml: str
    driver: str
    cuda: str


class SmiHeader(NamedTuple):
    """Versions in the banner of nvidia-smi's default table."""

    smi: str
    driver: str
    cuda: str


class XidEvent(NamedTuple):
    """One `NVRM: Xid` kernel log line; `at`: its seconds since boot where the line says them
    (dmesg's `[ 1234.567890]`), which an acknowledgement compares with."""

    xid: int
    pci: str
    message: str
    at: float | None = None


# dmesg's own prefix: seconds since boot (the kernel's clock), e.g. '[ 1234.567890] '.
_STAMP_RE = lazy(r"^\[\s*(\d+\.\d+)\]")


def kernel_stamp(line: str) -> float | None:
    """The seconds since boot a kernel log line carries (dmesg's prefix), else None (dmesg -T,
    journalctl and ISO times are wall clock: no acknowledgement compares with them)."""
    match = _STAMP_RE.match(line)
    return float(match[1]) if match else None


# What the kernel-log read's formats put before the kernel's message, each part optional and
# in this order: dmesg -r's '<4>'; dmesg -x's 'kern  :err   : '; then dmesg's stamp in brackets
# (seconds '[  123.456789] ', -T '[Mon Jan  1 00:00:00 2024] ', reltime, delta: a digit, '.'
# or ':', a digit inside; never '[drm] ') with CONFIG_PRINTK_CALLER's '[  T123] ' after it, or
# a date (--time-format=iso '2024-11-15T12:02:03,470068+00:00 ', syslog's and journalctl's
# 'Jan 18 11:38:05 ') followed by 'HOST kernel: ' and the kernel's own '[ 269.516977] ', or a
# journal line cut to 'kernel: '. A line that starts with blanks is a continuation of the
# message before it (dmesg and journalctl indent a message's further lines): nothing stripped.
_DATE = (
    r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S{0,24}"
    r"|[^\W\d_]{2,5}\.? {1,2}\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?)"
)
_KERNEL = r"kernel: (?:\[ *\d+\.\d+\] )?"
_PREFIX_RE = lazy(
    r"(?:<\d{1,3}>)?"
    r"(?:kern *: *(?:emerg|alert|crit|err|warn|notice|info|debug) *: )?"
    r"(?:\[[^\]]{0,40}?\d[.:]\d[^\]]{0,40}\] (?:\[ *[TC]\d+\] )?"
    rf"|{_DATE} (?:(?:[\w.-]+ )?{_KERNEL})?"
    rf"|{_KERNEL})?"
)


def kernel_message(line: str) -> str:
    """The kernel's message in one kernel-log line: the line after the prefixes the supported
    formats put before it (dmesg, dmesg -T, --time-format=iso, dmesg -x and -r, journalctl -k,
    syslog). A driver's event is a message that starts with its words; the same words further
    in are another message's text, which any account can write (a crashing program's file name
    in the segfault line, a command name in an audit record). A continuation line (indented
    under its message's first line) is returned whole, its blanks first: no message starts
    there."""
    prefix = _PREFIX_RE.match(line)  # every part optional: it always matches
    return line[prefix.end() :] if prefix else line


class TorchCapabilityWarning(NamedTuple):
    """torch's warning that its build has no kernels for a GPU, in any of its wordings: the GPU,
    its capability ('sm_120'), the build's capabilities where listed, and where a wording gives
    them as a range instead, (minimum, maximum or None)."""

    gpu: str
    capability: str
    supported: list[str]
    supported_range: tuple[str, str | None] | None = None


def _xml_root(xml_text: str) -> ET.Element:
    """nvidia-smi's XML parsed (xml.etree loaded only where a GPU printed some)."""
    import xml.etree.ElementTree as ET

    return ET.fromstring(xml_text.lstrip())


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


def is_l4t_module(module: KernelModule, text: str) -> bool:
    """Is this /proc/driver/nvidia/version a Jetson's? There the number after 'aarch64' is the
    Jetson Linux (L4T) release (35.3.1), not a driver version comparable with nvidia-smi's."""
    return "for aarch64" in text and int(module.version.split(".")[0]) < 100


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
    import csv

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
        for (name, unit), value in zip(header, row):
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


# What nvidia-smi prints instead of any report when it cannot reach the driver.
_SMI_FAILED = lazy(
    r"^(Failed to initialize NVML|NVIDIA-SMI has failed|No devices were found)", re.M
)


def smi_failed(text: str) -> bool:
    """Did nvidia-smi print why it could not report (NVML failed to start, no devices)?"""
    return _SMI_FAILED.search(text) is not None


def parse_throttle_reasons(xml_text: str) -> dict[str, list[str]]:
    """Active clock throttle/event reasons per GPU (PCI id) from `nvidia-smi -q -x`.

    Drivers before 530-ish write <clocks_throttle_reasons>, later ones <clocks_event_reasons>;
    both are read, and names lose their prefix ('gpu_idle', 'sw_power_cap').
    """
    root = _xml_root(xml_text)
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


# Current drivers write 'Xid (PCI:0000:97:00): 45, ...'; legacy ones 'Xid (0000:01:00): 3, ...'.
_XID_RE = lazy(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>\d+), (?P<msg>.*)$")


def parse_xid_lines(text: str) -> list[XidEvent]:
    """Xid events from kernel log text: dmesg, dmesg -T, --time-format=iso, journalctl -k,
    with or without the 'PCI:' prefix older drivers leave out; only messages that start with
    'NVRM: Xid (' (kernel_message)."""
    events = []
    for line in text.splitlines():
        match = _XID_RE.match(kernel_message(line)) if "NVRM: Xid (" in line else None
        if match:
            events.append(XidEvent(int(match["xid"]), match["pci"], match["msg"].rstrip(),
                                   kernel_stamp(line)))  # fmt: skip
    return events


def parse_torch_arch_list(text: str) -> list[str]:
    """Parse `print(torch.cuda.get_arch_list())` output (a Python list repr)."""
    import ast  # here, not at import: the node contracts load this module and never need it

    for line in reversed(text.splitlines()):
        if line.strip().startswith("["):
            value = ast.literal_eval(line.strip())
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return value
    raise ValueError("no arch list like ['sm_80', 'sm_90'] in the text")


def _sm(capability: str) -> str:
    """'7.0' -> 'sm_70', '12.0' -> 'sm_120' (newer wordings print dotted capabilities); an
    'sm_120' stays as it is."""
    if capability.startswith("sm_"):
        return capability
    major, _, minor = capability.partition(".")
    return f"sm_{major}{minor}"


def _sm_order(sm: str) -> tuple[int, int]:
    """'sm_89' -> (8, 9), 'sm_120' -> (12, 0) (an arch suffix, 'sm_90a', left out)."""
    digits = re.sub(r"\D", "", sm)
    return int(digits[:-1] or 0), int(digits[-1:] or 0)


def _torch_says(kind: str) -> list[re.Pattern[str]]:
    """The patterns gpurig/data/torch_warnings.yaml gives for one statement torch makes."""
    return [re.compile(p, re.M) for p in table("torch_warnings.yaml")[kind]]


def parse_torch_capability_warning(text: str) -> TorchCapabilityWarning | None:
    """torch's warning that its build has no kernels for the GPU, else None.

    Judged by what the text states, whichever of torch's wordings says it (all in
    gpurig/data/torch_warnings.yaml): a GPU named with its capability, then the build's
    capabilities as a list, a range, or not at all. A warning whose own list or range holds
    the GPU's capability (a source build's minimum and maximum wording, its kernels ran) says
    no such thing: None.
    """
    said = [m for p in _torch_says("gpu") if (m := p.search(text))]
    if not said:
        return None
    first = min(said, key=lambda m: m.start())
    supported = [
        _sm(cap)
        for p in _torch_says("supported")
        for m in p.finditer(text)
        for cap in m["list"].split()
    ]
    ranged = [m for p in _torch_says("supported_range") if (m := p.search(text))]
    supported_range = None
    if ranged:
        bounds = ranged[0].groupdict()
        maximum = bounds.get("maximum")
        supported_range = (_sm(bounds["minimum"]), _sm(maximum) if maximum else None)
    capability = _sm(first["capability"])
    if capability in supported:
        return None
    if supported_range is not None:
        low, high = supported_range
        own = _sm_order(capability)
        if _sm_order(low) <= own and (high is None or own <= _sm_order(high)):
            return None
    return TorchCapabilityWarning(
        first["gpu"], capability, list(dict.fromkeys(supported)), supported_range
    )


def has_no_kernel_image_error(text: str) -> bool:
    """Does the text say no compiled kernel fits this GPU (CUDA's runtime error, or torch's own
    words for it)?"""
    return any(p.search(text) for p in _torch_says("no_kernels"))


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
    root = _xml_root(xml_text)
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


# --- Health fields of `nvidia-smi -q` (text) and `-q -x` (XML) -------------------------------


class GpuHealth(NamedTuple):
    """One GPU's health fields, read alike from `nvidia-smi -q -x` and from `nvidia-smi -q`.

    None means the field is absent or N/A on this GPU or driver (no ECC, no row remapper, an
    older schema), never "fine".
    """

    pci: str
    name: str | None
    uuid: str | None
    serial: str | None
    persistence: bool | None
    mig_current: str | None
    mig_pending: str | None
    ecc_current: str | None
    ecc_pending: str | None
    pcie_gen_current: int | None
    pcie_gen_max: int | None
    pcie_width_current: int | None
    pcie_width_max: int | None
    perf_state: str | None
    retired_pending: bool | None
    remap_pending: bool | None
    remap_failure: bool | None
    remap_uncorrectable: int | None
    temp_c: int | None
    temp_slowdown_c: int | None
    tlimit_margin_c: int | None
    power_limit_w: float | None
    default_power_limit_w: float | None
    recovery_action: str | None
    fabric_state: str | None
    fabric_status: str | None


# Each field: (XML paths below <gpu>, text paths below "GPU <pci>"); the first one present wins.
# XML tag names and text labels differ between driver generations, hence the alternatives:
# 'Pending Page Blacklist' became 'Pending Page Retirement'; 595+ calls T.Limit 'Current T.Limit'.
_HEALTH_PATHS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "name": (("product_name",), ("Product Name",)),
    "uuid": (("uuid",), ("GPU UUID",)),
    "serial": (("serial",), ("Serial Number",)),
    "persistence": (("persistence_mode",), ("Persistence Mode",)),
    "mig_current": (("mig_mode/current_mig",), ("MIG Mode/Current",)),
    "mig_pending": (("mig_mode/pending_mig",), ("MIG Mode/Pending",)),
    "ecc_current": (("ecc_mode/current_ecc",), ("ECC Mode/Current",)),
    "ecc_pending": (("ecc_mode/pending_ecc",), ("ECC Mode/Pending",)),
    "pcie_gen_current": (
        ("pci/pci_gpu_link_info/pcie_gen/current_link_gen",),
        ("PCI/GPU Link Info/PCIe Generation/Current",),
    ),
    "pcie_gen_max": (
        ("pci/pci_gpu_link_info/pcie_gen/max_link_gen",),
        ("PCI/GPU Link Info/PCIe Generation/Max",),
    ),
    "pcie_width_current": (
        ("pci/pci_gpu_link_info/link_widths/current_link_width",),
        ("PCI/GPU Link Info/Link Width/Current",),
    ),
    "pcie_width_max": (
        ("pci/pci_gpu_link_info/link_widths/max_link_width",),
        ("PCI/GPU Link Info/Link Width/Max",),
    ),
    "perf_state": (("performance_state",), ("Performance State",)),
    "retired_pending": (
        ("retired_pages/pending_retirement", "retired_pages/pending_blacklist"),
        ("Retired Pages/Pending Page Retirement", "Retired Pages/Pending Page Blacklist"),
    ),
    "remap_pending": (("remapped_rows/remapped_row_pending",), ("Remapped Rows/Pending",)),
    "remap_failure": (
        ("remapped_rows/remapped_row_failure",),
        ("Remapped Rows/Remapping Failure Occurred",),
    ),
    "remap_uncorrectable": (
        ("remapped_rows/remapped_row_unc",),
        ("Remapped Rows/Uncorrectable Error",),
    ),
    "temp_c": (("temperature/gpu_temp",), ("Temperature/GPU Current Temp",)),
    "temp_slowdown_c": (
        ("temperature/gpu_temp_slow_threshold",),
        ("Temperature/GPU Slowdown Temp",),
    ),
    "tlimit_margin_c": (
        ("temperature/gpu_temp_tlimit",),
        ("Temperature/GPU T.Limit Temp", "Temperature/GPU Current T.Limit Temp"),
    ),
    "power_limit_w": (
        ("gpu_power_readings/current_power_limit", "power_readings/power_limit"),
        ("GPU Power Readings/Current Power Limit", "Power Readings/Power Limit"),
    ),
    "default_power_limit_w": (
        ("gpu_power_readings/default_power_limit", "power_readings/default_power_limit"),
        ("GPU Power Readings/Default Power Limit", "Power Readings/Default Power Limit"),
    ),
    "recovery_action": (("gpu_recovery_action",), ("GPU Recovery Action",)),
    "fabric_state": (("fabric/state",), ("Fabric/State",)),
    "fabric_status": (("fabric/status",), ("Fabric/Status",)),
}
_BOOLS = {"persistence": "Enabled", "retired_pending": "Yes", "remap_pending": "Yes"}
_BOOLS |= {"remap_failure": "Yes"}
_INTS = {"pcie_gen_current", "pcie_gen_max", "pcie_width_current", "pcie_width_max"}
_INTS |= {"remap_uncorrectable", "temp_c", "temp_slowdown_c", "tlimit_margin_c"}
_FLOATS = {"power_limit_w", "default_power_limit_w"}
_NUMBER_RE = lazy(r"(-?\d+(?:\.\d+)?)\s*(?:x|C|W)?")


def _typed(field: str, value: str | None) -> Any:
    """A raw nvidia-smi value as the field's type: '16x' -> 16, '700.00 W' -> 700.0, 'Yes'."""
    if value is None or value.strip() in _NA or value.strip() in {"", "Unknown Error"}:
        return None
    value = value.strip()
    if field in _BOOLS:
        return value == _BOOLS[field] if value in {_BOOLS[field], "Disabled", "No"} else None
    if field in _INTS | _FLOATS:
        match = _NUMBER_RE.fullmatch(value)
        if match is None:
            return None
        return float(match[1]) if field in _FLOATS else int(float(match[1]))
    return value


def _health(pci: str, lookup: Callable[[str], str | None], xml: bool) -> GpuHealth:
    values = {}
    for field, (xml_paths, text_paths) in _HEALTH_PATHS.items():
        raw = next(
            (v for v in map(lookup, xml_paths if xml else text_paths) if v is not None), None
        )
        values[field] = _typed(field, raw)
    return GpuHealth(pci=pci, **values)


def parse_health_xml(xml_text: str) -> list[GpuHealth]:
    """Health fields per GPU from `nvidia-smi -q -x` (v11 to v13 DTDs)."""
    root = _xml_root(xml_text)

    def finder(gpu: ET.Element) -> Callable[[str], str | None]:
        def lookup(path: str) -> str | None:
            node = gpu.find(path)
            return None if node is None or len(node) else (node.text or "").strip()

        return lookup

    return [_health(gpu.get("id", ""), finder(gpu), xml=True) for gpu in root.iter("gpu")]


def parse_smi_q_text(text: str) -> dict[str, dict[str, str]]:
    """`nvidia-smi -q` as {pci: {"Section/Sub/Label": value}}, one flat map per GPU.

    The layout is an indented outline ('Label : value' lines, bare lines opening a section);
    each GPU starts at a 'GPU 00000000:17:00.0' line. Label widths vary by driver and are
    ignored; indentation is measured, not assumed to be four spaces.
    """
    gpus: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("="):
            continue
        match = re.fullmatch(r"GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*", line)
        if match:
            current, stack = gpus.setdefault(match[1], {}), []
            continue
        if current is None:
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        label, sep, value = line.strip().partition(" : ")
        if not sep and line.rstrip().endswith(" :"):
            label, sep, value = line.strip()[:-2], ":", ""
        path = "/".join([name for _, name in stack] + [label.strip()])
        if sep:
            current[path] = value.strip()
        else:
            stack.append((indent, label.strip()))
    return gpus


def parse_health_text(text: str) -> list[GpuHealth]:
    """Health fields per GPU from `nvidia-smi -q` text output (the XML's twin)."""
    gpus = parse_smi_q_text(text)
    if not gpus:
        raise ValueError("no 'GPU 00000000:xx:xx.x' section in the nvidia-smi -q text")
    return [_health(pci, fields.get, xml=False) for pci, fields in gpus.items()]


# --- nvidia-smi -L: GPUs and their MIG devices -------------------------------------------------

# A MIG profile as NVIDIA names it (go-nvlib's MigProfile grammar): [<C>c.]<G>g.<GB>gb, then
# optional +attributes or -attributes ('3g.20gb', '1c.3g.71gb', '1g.18gb+me'). The inventory
# schema's gpu_expect.mig_slices keys use the same pattern (a test keeps them equal).
MIG_PROFILE = (
    r"(?:[1-9][0-9]?c\.)?[1-9][0-9]?g\.[1-9][0-9]{0,3}gb"
    r"(?:[+-][a-z][a-z0-9.]{0,15}(?:,[a-z][a-z0-9.]{0,15}){0,3})?"
)
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_LIST_GPU_RE = lazy(rf"GPU (\d+): (.{{1,96}}?) \(UUID: (GPU-{_UUID})\)")
# 470+ drivers name a MIG device MIG-<uuid>; 450/460 named it MIG-GPU-<parent uuid>/<GI>/<CI>.
_LIST_MIG_RE = lazy(
    rf"\s+MIG ({MIG_PROFILE})\s+Device\s+(\d+): \(UUID: (MIG-{_UUID}|MIG-(GPU-{_UUID})/\d+/\d+)\)"
)


class MigDevice(NamedTuple):
    """One MIG device (a slice) as `nvidia-smi -L` lists it under its GPU."""

    index: int
    profile: str
    uuid: str


class ListedGpu(NamedTuple):
    """One GPU line of `nvidia-smi -L` and the MIG devices listed under it."""

    index: int
    name: str
    uuid: str
    mig: list[MigDevice]


def parse_smi_list(text: str) -> list[ListedGpu]:
    """Parse `nvidia-smi -L`: GPU lines, each followed by its indented MIG device lines.

    Any other line (an NVML failure, 'No devices were found', a MIG line before any GPU, an
    old-style MIG UUID naming another GPU) raises, so a listing is never half read.
    """
    gpus: list[ListedGpu] = []
    for line in text.splitlines():
        line = line.rstrip()
        if not line:
            continue
        gpu, mig = _LIST_GPU_RE.fullmatch(line), _LIST_MIG_RE.fullmatch(line)
        if gpu:
            gpus.append(ListedGpu(int(gpu[1]), gpu[2], gpu[3], []))
        elif mig and gpus and mig[4] in (None, gpus[-1].uuid):
            gpus[-1].mig.append(MigDevice(int(mig[2]), mig[1], mig[3]))
        else:
            raise ValueError(f"not a GPU or MIG device line of nvidia-smi -L: {line[:120]!r}")
    return gpus


# What `--query-gpu`'s mig.mode.current says of a GPU whose -L line lists no MIG device: MIG
# off (recorded: H100 580.159.04, H200 590.48.01) or a GPU without MIG (L40S 595.80, RTX 2080
# SUPER 610.57.04). Anything else (Enabled, a new word) leaves the listing to -L.
NO_MIG = ("Disabled", "[N/A]")


def parse_query_listing(text: str) -> list[ListedGpu]:
    """The GPUs `nvidia-smi -L` would list, from `--query-gpu`'s rows (parse_query_gpu_csv): both
    print NVML's index, name and UUID, equal on every pair recorded from one machine (H100
    580.159.04; H100, H200 590.48.01; L40S 595.80; RTX 2080 SUPER 610.57.04). Only -L lists MIG
    devices, so a row in MIG mode, or one -L's grammar would refuse, raises."""
    listed = []
    for gpu in parse_query_gpu_csv(text):
        index, name, uuid = gpu.get("index") or "", gpu.get("name") or "", gpu.get("uuid") or ""
        line = f"GPU {index}: {name} (UUID: {uuid})"
        if gpu.get("mig.mode.current") not in (None, *NO_MIG) or not (
            index.isdigit() and _LIST_GPU_RE.fullmatch(line)
        ):
            raise ValueError(f"not a GPU without MIG for the listing: {line[:120]!r}")
        listed.append(ListedGpu(int(index), name, uuid, []))
    return listed


# --- NVLink, kernel GPU events, compute processes -----------------------------------------------


class NvlinkGpu(NamedTuple):
    """`nvidia-smi nvlink -s` for one GPU: its links and which of them are down."""

    index: int
    name: str
    uuid: str
    links: int
    inactive: list[int]


def parse_nvlink_status(text: str) -> list[NvlinkGpu]:
    """Per-GPU link states from `nvidia-smi nvlink -s`; a GPU without NVLink prints nothing."""
    gpus: list[NvlinkGpu] = []
    for line in text.splitlines():
        head = re.match(r"GPU (\d+): (.+?) \(UUID: (.*)\)\s*$", line)
        link = re.match(r"\s+Link (\d+): (.+?)\s*$", line)
        if head:
            gpus.append(NvlinkGpu(int(head[1]), head[2], head[3], 0, []))
        elif link and gpus:
            last = gpus[-1]
            down = last.inactive + ([int(link[1])] if "inactive" in link[2] else [])
            gpus[-1] = NvlinkGpu(last.index, last.name, last.uuid, last.links + 1, down)
    return gpus


class FallenOffBus(NamedTuple):
    """A kernel message that a GPU has fallen off the bus, with or without an Xid 79."""

    pci: str
    line: str
    at: float | None = None  # seconds since boot (kernel_stamp)


# Three wordings, newest first: 'NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.',
# 'NVRM: GPU at 0000:01:00.0 has fallen off the bus.' and the probe-time message whose PCI
# address sits on an earlier line ('NVRM: The NVIDIA GPU 0000:b3:00.0' ... 'fallen off the bus').
_PCI = r"([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
_FALLEN_RE = lazy(rf"NVRM: GPU (?:at )?{_PCI}:? (?:GPU )?has fallen off")
_PROBE_GPU_RE = lazy(rf"NVRM: The NVIDIA GPU {_PCI}")
# The probe-time message's further lines, where each line of it has its own prefix.
_PROBE_LINES = ("NVRM: (PCI ID: ", "NVRM: fallen off the bus")


def parse_fallen_off_bus(text: str) -> list[FallenOffBus]:
    """Every 'fallen off the bus' message in kernel log text, deduplicated per GPU and line:
    a message that starts with a single-line wording, or the probe-time message, whose 'fallen
    off the bus' line is one of the two right after the 'NVRM: The NVIDIA GPU' line that names
    the GPU (indented under it, or each with its own prefix), never a line further on."""
    events: list[FallenOffBus] = []
    probe, left = "", 0  # the GPU the probe-time message names; how many of its lines are left
    for line in text.splitlines():
        message = kernel_message(line) if "NVRM: " in line else ""
        if message[:1].isspace() or message.startswith(_PROBE_LINES):  # the message goes on
            left, message = left - 1, message.strip()
            if left < 0 or not message.startswith("NVRM: fallen off the bus"):
                continue
            pci = probe
        elif named := _PROBE_GPU_RE.match(message):
            probe, left = named[1], 2
            continue
        elif match := _FALLEN_RE.match(message):
            pci, left, message = match[1], 0, message.strip()
        else:
            left = 0
            continue
        if all((e.pci, e.line) != (pci, message) for e in events):
            events.append(FallenOffBus(pci, message, kernel_stamp(line)))
    return events


def parse_compute_apps(text: str) -> list[dict[str, Any]] | None:
    """`nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits`:
    one row per process using a GPU ({gpu_uuid, pid, used_mib}); None when nvidia-smi could
    not report (smi_failed). Any other line raises."""
    if smi_failed(text):
        return None
    apps = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != 3 or not cells[0]:
            raise ValueError(f"not a compute-apps row (uuid, pid, MiB): {line[:120]!r}")
        pid, used = (int(c) if c.isdigit() else None for c in cells[1:])
        apps.append({"gpu_uuid": cells[0], "pid": pid, "used_mib": used})
    return apps


# A debug line `nvidia-container-cli -d` interleaves with the report ('I0114 04:33:38.55 ...').
_CLI_DEBUG_RE = lazy(r"[IWEF]\d{4} ")
_CLI_DEVICE_FIELDS = {"Model", "GPU UUID", "Bus Location", "Architecture"}


def parse_container_cli_info(text: str) -> dict[str, Any]:
    """`nvidia-container-cli info`: what the container toolkit sees, which is what a container
    gets (driver and CUDA versions, one dict per device); on Tegra/Jetson hosts, which have no
    nvidia-smi, the only GPU view.

    A field printed as `(null)` (C's printf of a NULL string: a Jetson has no NVRM version, bus
    location or UUID) is absent, never a value. Raises when no 'NVRM version:' line is present
    (the CLI failed and printed why instead).
    """
    info: dict[str, Any] = {"driver": None, "cuda": None, "devices": []}
    reported = False
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep or _CLI_DEBUG_RE.match(line):
            continue
        key, value = key.strip(), value.strip()
        reported = reported or key == "NVRM version"
        if value == "(null)":
            continue
        if key == "NVRM version":
            info["driver"] = value
        elif key == "CUDA version":
            info["cuda"] = value
        elif key == "Device Index":
            info["devices"].append({"index": value})
        elif info["devices"] and key in _CLI_DEVICE_FIELDS:
            info["devices"][-1][key.lower().replace(" ", "_")] = value
    if not reported:
        raise ValueError("no 'NVRM version:' line in nvidia-container-cli info output")
    return info
