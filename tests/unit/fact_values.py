"""Fact values for tests of the checks and plans, made by the facts' own `parse()` from
recorded outputs (tests/fixtures/gpu), and a `read(FactClass, **kwargs)` answering them."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpurig.checks.gpu import FABRIC_MANAGER
from gpurig.facts.gpurig_interconnect import PcieAcs
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
from gpurig.facts.round_trip import Unreadable
from tests.unit.gpu_fixtures import read_fixture

# The nonce of output built by hand in the framing that facts/round_trip.py prints.
NONCE = "0123456789abcdef0123456789abcdef"


def framed(kind: str, parts: Mapping[str, Sequence[str]]) -> list[str]:
    """Lines as a run with NONCE prints them: the nonce, then each label's marker of `kind`
    (section: HostState's, part: a Sectioned fact's) and its lines."""
    lines = [f"--gpurig-nonce {NONCE}"]
    for label, body in parts.items():
        lines += ["", f"--gpurig-{kind}-{NONCE} {label}", *body]
    return lines


# Keyword arguments that name which of several reads of one fact is meant.
_WHICH = ("container", "checkout")


def reader(values: Mapping[type, Any]) -> Callable[..., Any]:
    """read(cls, **kwargs): values[cls], or values[cls][name] for a fact read per container or
    per checkout; an Unreadable value is raised, as the host's snapshot does. A fact the test
    did not answer is a KeyError: tests say what a check reads."""

    def read(cls: type, **kwargs: Any) -> Any:
        value = values[cls]
        for key in _WHICH:
            if key in kwargs and not isinstance(value, Unreadable):
                value = value[kwargs[key]]
        if isinstance(value, Unreadable):
            raise value
        return value

    return read


def _text(value: str | None) -> str | None:
    """A fixture's text when `value` names one, else the value itself."""
    if isinstance(value, str) and value.endswith((".txt", ".xml")):
        return read_fixture(value)
    return value


def _ran(text: str | None) -> str | None:
    """A `_smi` part as facts.gpurig_nvidia prints it: nvidia-smi ran, then its output."""
    return None if text is None else f"ran\n{text}"


def gpu_values(
    nvidia_smi: bool = True,
    listing: str | None = None,
    query: str | None = None,
    version: str | None = None,
    proc_version: str | None = None,
    smi_xml: str | None = None,
    compute_apps: str | None = "",
    nvlink: str | None = None,
    xid_lines: str | None = None,
    uvm_device: bool = True,
    nvswitch_devices: int = 0,
    fabricmanager: str | None = None,
    reboot_required: bool = False,
    reboot_required_pkgs: str = "",
    modinfo: bool = False,
    module_built: str | None = None,
    dkms: str | None = None,
    toolkit_info: str | None = None,
    acs: str | None = None,
) -> dict[type, Any]:
    """Every GPU fact's value for one host, from recorded outputs (fixture names or text);
    nvidia-smi's parts are absent where `nvidia_smi` is False."""
    smi = _ran if nvidia_smi else (lambda _: None)
    gpu_parts = {
        "list": smi(_text(listing) or ""),
        "query": smi(_text(query) or ""),
        "version": smi(_text(version) or ""),
        "module": _text(proc_version) or "",
        "toolkit": _ran(_text(toolkit_info)),
    }
    units = {FABRIC_MANAGER: {"active": fabricmanager, "enabled": ""}} if fabricmanager else {}
    return {
        NvidiaGpus: NvidiaGpus.parse({k: v for k, v in gpu_parts.items() if v is not None}),
        GpuHealth: GpuHealth.parse({"xml": smi(_text(smi_xml) or "")} if smi_xml else {}),
        GpuProcesses: GpuProcesses.parse(
            {"apps": smi(_text(compute_apps) or "")} if compute_apps is not None else {}
        ),
        NvlinkStatus: NvlinkStatus.parse({"nvlink": smi(_text(nvlink) or "")}),
        GpuDevices: {"uvm_device": uvm_device, "nvswitch_devices": nvswitch_devices},
        Units: {"systemd": True, "units": units},
        RebootRequired: RebootRequired.parse(
            {"flag": "yes" if reboot_required else "", "packages": reboot_required_pkgs}
        ),
        NvidiaModule: NvidiaModule.parse(
            {"modinfo": "modinfo\n" + (module_built or "") if modinfo else "", "dkms": dkms or ""}
        ),
        KernelLog: KernelLog.parse({"gpu_lines": _text(xid_lines) or ""}),
        PcieAcs: PcieAcs.parse({"acs": _text(acs) or ""}),
    }


# Every reading of one rented H100 VM: an NVIDIA H100 80GB HBM3 passed through to a Firecracker
# VM, driver 580.159.04, recorded 2026-11-22 (tests/fixtures/gpu/*_h100_580.159.04_*): one
# machine, one day.
H100_VM: dict[str, Any] = {
    "nvidia_smi": True,
    "query": "nvidia-smi_query-gpu_csv-noheader_h100_580.159.04_health-fields.txt",
    "version": "nvidia-smi--version_h100_580.159.04_vm.txt",
    "smi_xml": "nvidia-smi-q-x_h100_580.159.04_vm.xml",
    "proc_version": "proc_driver_nvidia_version_580.159.04_open_nixbld.txt",
    "nvlink": "nvidia-smi_nvlink-s_h100-single_580.159.04_vm.txt",
    "listing": "nvidia-smi-L_h100_580.159.04_vm.txt",
    "xid_lines": "kernel_nvrm_boot_h100_580.159.04_vm.txt",
    # Not recorded: the apps query. Its default table (nvidia-smi_h100_580.159.04_vm.txt) shows
    # "No running processes found", for which the apps query prints nothing.
    "compute_apps": "",
    "uvm_device": "/dev/nvidia-uvm\n" in read_fixture("ls-dev-nvidia_h100_580.159.04_vm.txt"),
}


def h100_vm(**raw: Any) -> dict[type, Any]:
    """The GPU facts' values parsed from the H100 VM's recordings (H100_VM), `raw` replacing
    some."""
    return gpu_values(**{**H100_VM, **raw})


def run_here(cls: type, env_path: str | None = None, **kwargs: Any) -> Any:
    """A fact's command run here by sh (optionally with another PATH), its output handed to
    the same instance's process(), as pyinfra does on a host."""
    fact = cls()
    env = {"PATH": env_path} if env_path is not None else None
    out = subprocess.run(["sh", "-c", fact.command(**kwargs)], capture_output=True, text=True,
                         env=env, timeout=120, check=True)  # fmt: skip
    lines = out.stdout.splitlines()
    return fact.process(lines) if lines else fact.default()


def load_every_table() -> None:
    """Parse every data table now: pyinfra_testing's operation tests patch os.stat while an
    operation runs (its stand-in refuses Path.stat's follow_symlinks), so a table an operation
    reads first must already be loaded, whatever ran before."""
    from gpurig.data.tables import HERE, table

    for name in sorted(os.listdir(HERE)):
        if name.endswith(".yaml"):
            table(name)
