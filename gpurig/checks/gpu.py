"""GPU checks the converge cannot fix: pure rules `rule(spec, read) -> [Finding]` over the GPU
facts (facts/gpurig_nvidia.py: the one GPU query, health, processes, NVLink, devices, the
kernel log...), read through the checks' reader (gpurig.checks.all). Every finding names its GPU
(or the driver, or the GPUs together), carries a remediation (restart-job, reset-gpu, reboot,
reconverge, contact-provider) and, where the provider must act, the evidence to send: the
GPU's PCI address, serial and UUID, and the kernel log lines. Ids, severities, remediations,
thresholds and sources: gpurig/data/checks.yaml.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from gpurig.checks.compat import DRIVER
from gpurig.checks.rules import ByInput, by_input, found, rules
from gpurig.facts.gpurig_nvidia import (
    GpuDevices,
    GpuHealth,
    GpuProcesses,
    KernelLog,
    NvidiaGpus,
    NvidiaModule,
    NvlinkStatus,
    RebootRequired,
)
from gpurig.facts.gpurig_units import Units
from gpurig.spec.finding import Finding
from gpurig.spec.pattern import lazy
from gpurig.spec.words import counted

Gpu = Mapping[str, Any]
Read = Callable[..., Any]
Spec = Mapping[str, Any]
FABRIC_MANAGER = "nvidia-fabricmanager"
# The spec key this module reads: gpu_expect: {count: N, model: "H100", mig: enabled|disabled,
# mig_slices: [{profile: 3g.20gb, count: 2}]}.
EXPECT_KEY = "gpu_expect"
_LOG_LINES_MAX = 5

IDS = (
    "gpu.missing", "gpu.unexpected", "gpu.throttle", "gpu.ecc", "gpu.zombie_vram", "gpu.count",
    "gpu.model", "gpu.pcie_link", "gpu.nvlink_down", "gpu.persistence", "gpu.fabric_manager",
    "gpu.ecc_mode_mixed", "gpu.retired_pages_pending", "gpu.row_remap_pending",
    "gpu.row_remap_failure", "gpu.uvm_missing", "gpu.mig_mode", "gpu.mig_pending",
    "gpu.mig_slices", "gpu.thermal", "gpu.power_cap", "host.reboot_pending",
    "gpu.module_missing", "gpu.nvml_mismatch", "gpu.fallen_off_bus", "gpu.xid",
    "gpu.recovery_action",
)  # fmt: skip


def subject(pci: str | None) -> str:
    """One GPU, by its PCI address as nvidia-smi prints it: the same words in every check."""
    return f"GPU {pci}"


def _several(healths: Sequence[Gpu]) -> str:
    """The subject of a finding about some GPUs: the one GPU, or how many."""
    return subject(healths[0].get("pci")) if len(healths) == 1 else f"{len(healths)} GPUs"


def _who(health: Gpu) -> str:
    """The evidence a provider needs to find the board: PCI address, model, serial, UUID."""
    parts = [f"GPU {health.get('pci')}", health.get("name") or "unknown model"]
    parts += [f"{key} {health[key]}" for key in ("serial", "uuid") if health.get(key)]
    return " ".join(parts[:1]) + f" ({', '.join(parts[1:])})"


def _health(health: Gpu) -> list[Gpu]:
    """Each GPU's health fields from GpuHealth's reading."""
    return list(health["health"])


# A PCI address as nvidia-smi (8-hex domain, '00000009:01:00.0'), /proc/driver/nvidia and the
# kernel log (4-hex domain, 'PCI:0009:01:00', with or without the function) print it.
_PCI_ADDRESS = lazy(
    r"(?:pci:)?(?:([0-9a-f]{1,8}):)?([0-9a-f]{2}):([0-9a-f]{2})(?:\.[0-7])?", re.IGNORECASE
)


def pci_key(pci: str) -> str:
    """One GPU's key, whoever printed its address: '00000009:01:00.0', '0009:01:00.0' and the
    Xid's 'PCI:0009:01:00' are one GPU; '00000019:01:00.0' (another PCI domain, as on GH200
    and GB200 boards) is another. The domain is kept and its width normalised."""
    match = _PCI_ADDRESS.fullmatch(pci.strip())
    if match is None:
        return pci.strip().lower()
    domain = int(match[1] or "0", 16)
    return f"{domain:08x}:{match[2].lower()}:{match[3].lower()}"


def _by_pci(health: Gpu) -> dict[str, Gpu]:
    return {pci_key(h["pci"]): h for h in _health(health) if h.get("pci")}


def _identify(health: Gpu, pci: str) -> str:
    found = _by_pci(health).get(pci_key(pci))
    return _who(found) if found else f"GPU {pci}"


def _log(lines: Sequence[str]) -> str:
    shown = list(lines[:_LOG_LINES_MAX])
    more = len(lines) - len(shown)
    return " | ".join(shown) + (f" (+{more} more)" if more > 0 else "")


def _nvml(_spec: Spec, read: Read) -> Iterator[Finding]:
    gpu = read(NvidiaGpus)
    library = gpu["nvml_mismatch"]
    if library is None:
        return
    module = (gpu.get("kernel_module") or {}).get("version") or "not loaded"
    yield found(
        "gpu.nvml_mismatch",
        DRIVER,
        "nvidia-smi cannot talk to the driver: user-space libraries and kernel module differ",
        "NVML library version = kernel module version",
        f"NVML library {library or '(version not printed)'}, kernel module {module}",
        "the driver packages were upgraded under the running module (unattended-upgrades?)",
    )


def _expected(spec: Spec, read: Read) -> Iterator[Finding]:
    expect = spec.get(EXPECT_KEY) or {}
    gpu, health = read(NvidiaGpus), read(GpuHealth)
    gpus = gpu["gpus"] or []
    if not gpu["smi"] or gpu["nvml_mismatch"] is not None:
        return  # no reading to compare; gpu.missing / gpu.nvml_mismatch say why
    names = [g.get("name") or "?" for g in gpus]
    if "count" in expect and len(gpus) != expect["count"]:
        yield found(
            "gpu.count",
            "GPUs",
            f"the host has {counted(len(gpus), 'GPU')}, {expect['count']} "
            f"{'was' if expect['count'] == 1 else 'were'} declared",
            counted(expect["count"], "GPU"),
            f"{len(gpus)}: {', '.join(names) or 'none'}",
            "compare with the rental order",
        )
    model = expect.get("model")
    wrong = [g for g in gpus if model and model.lower() not in (g.get("name") or "").lower()]
    if wrong:
        yield found(
            "gpu.model",
            "GPUs",
            f"{counted(len(wrong), 'GPU')} {'is' if len(wrong) == 1 else 'are'} not the declared "
            "model",
            model or "",
            "; ".join(f"GPU {g.get('index')} {g.get('name')} uuid {g.get('uuid')}" for g in wrong),
            "compare with the rental order",
        )
    yield from _mig_mode(expect.get("mig"), health)
    if "mig_slices" in expect:
        yield from _mig_slices(expect["mig_slices"], gpu)


def _mig_mode(declared: str | None, readings: Gpu) -> Iterator[Finding]:
    """MIG mode per GPU: as declared once the GPU is next reset, and no change waiting."""
    for health in _health(readings):
        current = (health.get("mig_current") or "").lower()
        pending = (health.get("mig_pending") or "").lower() or current
        later = f", {pending} after the next reset" if pending != current else ""
        if declared and current and pending != declared:
            yield found(
                "gpu.mig_mode",
                subject(health.get("pci")),
                f"MIG is {current} on a GPU declared {declared}{later}",
                f"MIG {declared}",
                f"{_who(health)}: MIG {current}{later}",
                f"as root: nvidia-smi -i {health.get('pci')} -mig "
                f"{1 if declared == 'enabled' else 0}, then reset the GPU",
            )
        elif current and pending != current:
            yield found(
                "gpu.mig_pending",
                subject(health.get("pci")),
                f"a MIG mode change waits for a GPU reset: MIG stays {current} until then",
                f"MIG {pending} in effect, nothing pending",
                f"{_who(health)}: MIG {current} now, {pending} after the next reset",
                "reset the GPU to apply it",
            )


def mig_slices(gpu: Gpu) -> list[dict[str, Any]]:
    """Every MIG device `nvidia-smi -L` listed, with its parent GPU (`gpu`: NvidiaGpus).

    A slice has no compute capability of its own (CUDA reports its parent's), so each carries
    the parent's `compute_cap` from the query row with the parent's UUID (None if not read).
    """
    rows = {g.get("uuid"): g for g in gpu["gpus"] or []}
    slices = []
    for parent in gpu["listing"] or []:
        capability = (rows.get(parent["uuid"]) or {}).get("compute_cap")
        for device in parent["mig"]:
            slices.append(
                {**device, "gpu_index": parent["index"], "gpu_name": parent["name"],
                 "gpu_uuid": parent["uuid"], "capability": capability}
            )  # fmt: skip
    return slices


def job_capabilities(gpu: Gpu) -> list[str]:
    """The compute capabilities a job can be given: each MIG slice's parent's, and each GPU's
    own where MIG is off (a MIG GPU without slices offers none). Without a listing, every
    GPU's."""
    rows = gpu["gpus"] or []
    if gpu["listing"] is None:
        return sorted({g["compute_cap"] for g in rows if g.get("compute_cap")})
    whole = {g.get("uuid") for g in rows if g.get("mig.mode.current") != "Enabled"}
    caps = {s["capability"] for s in mig_slices(gpu)}
    caps |= {g.get("compute_cap") for g in rows if g.get("uuid") in whole}
    return sorted(c for c in caps if c)


def _tally(profiles: Iterable[str]) -> str:
    """'2 x 3g.20gb + 1 x 1g.10gb', or 'none'."""
    counts = Counter(profiles)
    return " + ".join(f"{n} x {p}" for p, n in sorted(counts.items())) or "none"


def _mig_slices(declared: Sequence[Mapping[str, Any]], gpu: Gpu) -> Iterator[Finding]:
    """The node's MIG slices, counted by profile, against gpu_expect.mig_slices (a profile
    listed twice counts twice)."""
    wanted: Counter[str] = Counter()
    for entry in declared:
        wanted[entry["profile"]] += entry["count"]
    expected = _tally(wanted.elements())
    listing = gpu["listing"]
    if listing is None:
        why = gpu["listing_error"] or "nvidia-smi -L printed nothing"
        yield found(
            "gpu.mig_slices",
            "MIG slices",
            "the MIG slices could not be read",
            expected,
            f"unreadable: {why}",
            "run nvidia-smi -L on the node",
        )
        return
    present = mig_slices(gpu)
    if Counter(s["profile"] for s in present) == wanted:
        return
    where = "; ".join(
        f"GPU {g['index']} {g['name']}: {_tally(d['profile'] for d in g['mig'])}" for g in listing
    )
    yield found(
        "gpu.mig_slices",
        "MIG slices",
        f"the node has {len(present)} MIG slices ({_tally(s['profile'] for s in present)}), "
        f"{expected} were declared",
        expected,
        where or "no GPU listed",
        "the cluster admin or provider sets the MIG layout (nvidia-smi mig -cgi PROFILES -C as "
        "root, or nvidia-mig-parted)",
    )


def _link(_spec: Spec, read: Read) -> Iterator[Finding]:
    idle = set(rules()["idle_perf_states"])
    for health in _health(read(GpuHealth)):
        width, width_max = health.get("pcie_width_current"), health.get("pcie_width_max")
        gen, gen_max = health.get("pcie_gen_current"), health.get("pcie_gen_max")
        narrow = width is not None and width_max is not None and width < width_max
        slow = gen is not None and gen_max is not None and gen < gen_max
        if narrow or (slow and health.get("perf_state") not in idle):
            yield found(
                "gpu.pcie_link",
                subject(health.get("pci")),
                "a GPU's PCIe link trained below what the slot and card support",
                f"gen {gen_max} x{width_max}",
                f"{_who(health)}: gen {gen} x{width} in {health.get('perf_state')}",
                "reseat or move the card (a riser or slot fault) ",
            )


def _nvlink(_spec: Spec, read: Read) -> Iterator[Finding]:
    for entry in read(NvlinkStatus):
        if entry.get("inactive"):
            down = ", ".join(str(n) for n in entry["inactive"])
            yield found(
                "gpu.nvlink_down",
                f"GPU {entry['index']}",
                f"{len(entry['inactive'])} of {entry['links']} NVLink links are down",
                f"all {entry['links']} links up",
                f"GPU {entry['index']} ({entry['name']}, uuid {entry['uuid']}): links {down}",
                "collective operations fall back to PCIe or hang; if a reset does not bring the "
                "links back, send this to the provider",
            )


def _modes(_spec: Spec, read: Read) -> Iterator[Finding]:
    gpu = read(GpuHealth)
    off = [h for h in _health(gpu) if h.get("persistence") is False]
    if off:
        yield found(
            "gpu.persistence",
            _several(off),
            "persistence mode is off: the driver re-initialises the GPU for every job",
            "persistence on",
            "; ".join(_who(h) for h in off),
            "as root: systemctl enable --now nvidia-persistenced",
        )
    ecc = {h.get("ecc_current") for h in _health(gpu) if h.get("ecc_current")}
    pending = [h for h in _health(gpu) if h.get("ecc_pending") not in (None, h.get("ecc_current"))]
    if len(ecc) > 1 or pending:
        yield found(
            "gpu.ecc_mode_mixed",
            "GPUs",
            "ECC is not set the same way on every GPU, or a change waits for a reboot",
            "one ECC mode, nothing pending",
            "; ".join(
                f"{_who(h)}: ECC {h.get('ecc_current')} (pending {h.get('ecc_pending')})"
                for h in _health(gpu)
                if h.get("ecc_current")
            ),
            "ranks on ECC-off GPUs can silently compute on corrupted memory",
        )


def _fabric(_spec: Spec, read: Read) -> Iterator[Finding]:
    devices, health = read(GpuDevices), read(GpuHealth)
    units = read(Units, units=[FABRIC_MANAGER])["units"]
    switches = devices["nvswitch_devices"]
    service = (units.get(FABRIC_MANAGER) or {}).get("active") or None
    bad = [
        h
        for h in _health(health)
        if h.get("fabric_state") not in (None, "Completed")
        or h.get("fabric_status") not in (None, "Success")
    ]
    if (switches and service != "active") or bad:
        yield found(
            "gpu.fabric_manager",
            "NVSwitch fabric",
            "an NVSwitch system whose fabric is not up: CUDA cannot use the GPUs together",
            "nvidia-fabricmanager active, fabric state Completed",
            f"{switches} NVSwitch devices, nvidia-fabricmanager {service or 'not found'}"
            + "".join(
                f"; {_who(h)}: fabric {h.get('fabric_state')}/{h.get('fabric_status')}" for h in bad
            ),
            "the fabric manager version must equal the driver's",
        )


def _memory(_spec: Spec, read: Read) -> Iterator[Finding]:
    gpu = read(GpuHealth)
    for key, check_id, what in (
        ("retired_pending", "gpu.retired_pages_pending", "memory pages wait to be retired"),
        ("remap_pending", "gpu.row_remap_pending", "memory rows wait to be remapped"),
        ("remap_failure", "gpu.row_remap_failure", "row remapping failed: bad memory stays"),
    ):
        hit = [h for h in _health(gpu) if h.get(key)]
        if hit:
            yield found(
                check_id,
                _several(hit),
                f"{counted(len(hit), 'GPU')}: {what}",
                "no",
                "; ".join(
                    f"{_who(h)}, uncorrectable rows {h.get('remap_uncorrectable')}" for h in hit
                ),
                "until then jobs may see uncorrectable ECC errors",
            )


def _heat_power(_spec: Spec, read: Read) -> Iterator[Finding]:
    gpu = read(GpuHealth)
    reasons = gpu["throttle"]
    for health in _health(gpu):
        active = set(reasons.get(health.get("pci"), []))
        temp, slow = health.get("temp_c"), health.get("temp_slowdown_c")
        margin = health.get("tlimit_margin_c")
        hot = sorted(active & {"hw_thermal_slowdown", "sw_thermal_slowdown"})
        if (
            hot
            or (temp is not None and slow is not None and temp >= slow)
            or (margin is not None and margin <= 0)
        ):
            yield found(
                "gpu.thermal",
                subject(health.get("pci")),
                "a GPU is hot enough to slow its clocks",
                "below the slowdown temperature",
                f"{_who(health)}: {temp} C, slowdown {slow} C, T.Limit margin {margin} C"
                + (f", active: {', '.join(hot)}" if hot else ""),
                "check fans and airflow",
            )
        limit, default = health.get("power_limit_w"), health.get("default_power_limit_w")
        lowered = limit is not None and default is not None and limit < default - 1
        if lowered or "hw_power_brake_slowdown" in active:
            yield found(
                "gpu.power_cap",
                subject(health.get("pci")),
                "a GPU runs under a lowered power limit or an external power brake",
                f"power limit {default} W, no power brake",
                f"{_who(health)}: limit {limit} W"
                + (
                    ", hw_power_brake_slowdown active"
                    if "hw_power_brake_slowdown" in active
                    else ""
                ),
                "a provider-set cap or a PSU fault costs throughput",
            )


def _host(_spec: Spec, read: Read) -> Iterator[Finding]:
    reboot, gpu = read(RebootRequired), read(NvidiaGpus)
    devices, module = read(GpuDevices), read(NvidiaModule)
    if reboot["required"]:
        pkgs = reboot["packages"]
        yield found(
            "host.reboot_pending",
            "host",
            "the host waits for a reboot after package upgrades",
            "no pending reboot",
            f"/var/run/reboot-required ({', '.join(pkgs) or 'packages not listed'})",
            "a driver upgrade only takes effect after it",
        )
    if gpu["smi"] and devices["uvm_device"] is False and gpu["gpus"]:
        yield found(
            "gpu.uvm_missing",
            "/dev/nvidia-uvm",
            "/dev/nvidia-uvm is missing: CUDA programs fail to initialise",
            "/dev/nvidia-uvm",
            "absent",
            "as root: nvidia-modprobe -u -c=0; if that fails the nvidia-uvm module does not load",
        )
    loaded = bool(gpu["kernel_module"])
    if gpu["smi"] and not loaded and module["modinfo"] and not module["built"]:
        yield found(
            "gpu.module_missing",
            DRIVER,
            "the NVIDIA driver is installed but its kernel module is neither loaded nor built "
            "for the running kernel",
            "nvidia.ko for the running kernel",
            f"modinfo nvidia: none; dkms status: {_log((module['dkms'] or 'none').splitlines())}",
            "build it (dkms autoinstall) or boot the kernel it was built for",
        )


def _recovery_remedy(action: str) -> str:
    """The remediation for a GPU Recovery Action (nvidia-smi -q, or Xid 154's message)."""
    return rules()["recovery_actions"].get(action) or "contact-provider"


def _xid_remedy(xid: int, message: str) -> tuple[str, str]:
    """(remediation, catalog name) for one Xid; Xid 154 names its action in the message."""
    mnemonic, bucket = rules()["xids"].get(xid, ["not in the catalog table", "RESTART_APP"])
    if xid == 154:
        action = re.findall(r"\(([^()]+)\)", message)
        return _recovery_remedy(action[-1] if action else ""), mnemonic
    return rules()["xid_buckets"][bucket], mnemonic


def xid_severity(remedy: str) -> str:
    """A gpu.xid finding's severity, by the remediation its code gets (checks.yaml)."""
    return rules()["xid_severities"][remedy]


def xid_by_input() -> list[ByInput]:
    """gpu.xid's severity and remediation per Xid, judged as _kernel_log judges them: the
    catalog table's codes (79 is gpu.fallen_off_bus), Xid 154 by the action it names, and a
    code not in the table."""
    rows = []
    for xid in sorted(rules()["xids"]):
        if xid not in (79, 154):
            remedy = _xid_remedy(xid, "")[0]
            rows.append(ByInput(xid_severity(remedy), remedy, f"Xid {xid}"))
    for action in rules()["recovery_actions"]:
        remedy = _xid_remedy(154, f"({action})")[0]
        rows.append(ByInput(xid_severity(remedy), remedy, f"Xid 154 ({action})"))
    remedy = _xid_remedy(0, "")[0]  # 0: no Xid has it
    rows.append(ByInput(xid_severity(remedy), remedy, "an Xid not in the catalog table"))
    return [row._replace(when=_codes(row.when)) for row in by_input(rows)]


def _codes(joined: str) -> str:
    """'Xid 8; Xid 13; Xid 154 (None)' as 'Xid 8, 13, 154 (None)'."""
    return "Xid " + ", ".join(part.removeprefix("Xid ") for part in joined.split("; "))


def recovery_by_input() -> list[ByInput]:
    """gpu.recovery_action's remediation per action the driver can set ("None" sets none)."""
    severity = rules()["checks"]["gpu.recovery_action"]["severity"]
    return by_input(ByInput(severity, _recovery_remedy(action), action)
                    for action in rules()["recovery_actions"] if action != "None")  # fmt: skip


def _kernel_log(_spec: Spec, read: Read) -> Iterator[Finding]:
    log, gpu = read(KernelLog), read(GpuHealth)
    # Per GPU (its key): the address as first logged, for a GPU nvidia-smi no longer lists.
    fallen: dict[str, tuple[str, list[str]]] = {}
    for event in log["fallen_off_bus"]:
        fallen.setdefault(pci_key(event["pci"]), (event["pci"], []))[1].append(event["line"])
    by_code: dict[tuple[int, str], list[str]] = {}
    for event in log["xids"]:
        line = f"Xid ({event['pci']}): {event['xid']}, {event['message']}"
        if event["xid"] == 79:
            fallen.setdefault(pci_key(event["pci"]), (event["pci"], []))[1].append(line)
        else:
            remedy, _ = _xid_remedy(event["xid"], event["message"])
            by_code.setdefault((event["xid"], remedy), []).append(line)
    for key, (pci, lines) in sorted(fallen.items()):
        yield found(
            "gpu.fallen_off_bus",
            subject((_by_pci(gpu).get(key) or {}).get("pci") or pci),
            "a GPU has fallen off the bus: the host no longer reaches it over PCIe",
            "GPU reachable",
            f"{_identify(gpu, pci)}; log: {_log(lines)}",
            "if it falls off again after the reboot, send this to the provider",
        )
    for (xid, remedy), lines in sorted(by_code.items()):
        _, mnemonic = _xid_remedy(xid, "")
        yield found(
            "gpu.xid",
            "kernel log",
            f"Xid {xid} ({mnemonic}) logged {counted(len(lines), 'time')} since boot",
            "no Xid events",
            _log(lines),
            f"NVIDIA's catalog action for Xid {xid}",
            remediation=remedy,
            severity=xid_severity(remedy),
        )
    for health in _health(gpu):
        action = health.get("recovery_action")
        if action and action != "None":
            remedy = _recovery_remedy(action)
            yield found(
                "gpu.recovery_action",
                subject(health.get("pci")),
                f"the driver asks for recovery: {action}",
                "GPU Recovery Action None",
                _who(health),
                "the driver set this after an error it cannot clear itself",
                remediation=remedy,
            )


def _presence(spec: Spec, read: Read) -> Iterator[Finding]:
    wanted, gpu = spec.get("gpu", "auto"), read(NvidiaGpus)
    # Without nvidia-smi (a Jetson) the container toolkit's devices are the GPUs there are.
    view = gpu["toolkit_view"] if not gpu["smi"] else None
    found_gpus = len(gpu["gpus"] or (view or {}).get("devices") or [])
    if wanted == "required" and not found_gpus:
        error = gpu["gpus_error"]
        yield found(
            "gpu.missing",
            "GPUs",
            "a GPU is required but nvidia-smi lists none",
            ">= 1 GPU",
            f"0 GPUs{f' ({error})' if error else ''}",
            "check the NVIDIA driver is installed and loaded (nvidia-smi, dmesg)",
        )
    if wanted == "absent" and found_gpus:
        yield found(
            "gpu.unexpected",
            "GPUs",
            "the spec says no GPU but the host has some",
            "no GPU",
            counted(found_gpus, "GPU"),
            "set gpu: auto or required for this host",
        )


def _throttle(_spec: Spec, read: Read) -> Iterator[Finding]:
    """Hardware clock slowdowns per GPU. A thermal or power-brake reason is also gpu.thermal's
    or gpu.power_cap's, with its own remedy (the table's explained_by leaves this one out)."""
    harmful = set(rules()["harmful_throttle_reasons"])
    for pci, reasons in sorted(read(GpuHealth)["throttle"].items()):
        active = sorted(harmful & set(reasons))
        if active:
            yield found(
                "gpu.throttle",
                subject(pci),
                "GPU clocks are held down for hardware reasons (heat or power)",
                "no hardware slowdown",
                ", ".join(active),
                "check cooling, fans and power delivery; ask the provider to inspect the node",
            )


def _ecc(_spec: Spec, read: Read) -> Iterator[Finding]:
    for pci, count in sorted(read(GpuHealth)["ecc_uncorrectable"].items()):
        if count:
            yield found(
                "gpu.ecc",
                subject(pci),
                "GPU memory reports uncorrectable ECC errors since the driver loaded",
                "0 uncorrectable ECC errors",
                f"{count} uncorrectable ECC errors",
                "drain the host and reset the GPU; if errors return, have it replaced",
            )


def _zombie_vram(_spec: Spec, read: Read) -> Iterator[Finding]:
    gpu, apps = read(NvidiaGpus), read(GpuProcesses)
    if apps is None:
        return
    busy = {a["gpu_uuid"] for a in apps}
    floor = rules()["zombie_vram_min_mib"]
    for row in gpu["gpus"] or []:
        used = int(row.get("memory.used") or 0)
        idle = row.get("uuid") not in busy and row.get("mig.mode.current") != "Enabled"
        if idle and used >= floor:
            yield found(
                "gpu.zombie_vram",
                subject(row.get("pci.bus_id")),
                "GPU memory is in use with no compute process: a dead process still holds it",
                "no memory without a process",
                f"GPU {row.get('index')}: {used} MiB",
                "find the holder (fuser -v /dev/nvidia*) and kill it, or reset the GPU",
            )


RULES = (
    _presence, _expected, _nvml, _link, _nvlink, _modes, _fabric, _memory, _heat_power,
    _throttle, _ecc, _zombie_vram, _host, _kernel_log,
)  # fmt: skip


def check(spec: Spec, read: Read) -> list[Finding]:
    """Every GPU finding for one host's spec and GPU facts."""
    return [finding for rule in RULES for finding in rule(spec, read)]
