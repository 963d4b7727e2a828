"""NVIDIA facts: the one GPU query (`NvidiaGpus`: the listing, the query rows, the kernel
module) that the plans, the checks, the fleet view, onboarding and acceptance all read; the GPU
health readings the checks judge; and what the container toolkit deploy reads (keyring, CDI
spec). Each is one small command batched into the host's one round trip; parsers live in
gpurig.read.gpu_parse and are tested on recordings from real GPU machines."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any, Optional

from gpurig.facts.round_trip import BOUNDED, LINES, START, Sectioned, part_text, section
from gpurig.read import gpu_parse, interconnect_parse
from gpurig.spec.tuples import asdict


def _tool(tool: str, *args: str) -> str:
    """A part running `tool` (bounded) where it is installed: a first line saying it ran, then
    its output (`_ran` reads it back)."""
    return (
        f"{BOUNDED}\nif command -v {tool} >/dev/null 2>&1; then echo ran\n"
        f"bounded {tool} {' '.join(args)}\nfi"
    )


def _smi(*args: str) -> str:
    """A part running nvidia-smi where it is installed."""
    return _tool("nvidia-smi", *args)


def _ran(parts: Mapping[str, str], label: str) -> str | None:
    """What the tool printed in a `_tool` part; None when it is not installed."""
    first, _, rest = (parts.get(label) or "").partition("\n")
    return rest if first == "ran" else None


def _refused(parse: Any, text: str | None) -> tuple[Any, str | None]:
    """(parse(text), None), or (None, the parser's reason) for output of another shape; (None,
    None) when nothing was printed."""
    if not text or not text.strip():
        return None, None
    try:
        return parse(text), None
    except ValueError as exc:
        return None, str(exc)


def _columns(*fields: str) -> str:
    """`read`'s variable names for the query's columns up to the last of `fields` (c0, c1, ...)
    and one for the rest of the row."""
    last = max(gpu_parse.QUERY_GPU_FIELDS.index(f) for f in fields)
    return " ".join([*(f"c{i}" for i in range(last + 1)), "gpurig_rest"])


def _column(field: str) -> str:
    """The query column `field` as `read` left it, less the space after csv's comma."""
    return f'"${{c{gpu_parse.QUERY_GPU_FIELDS.index(field)}# }}"'


# The GPU query asks nvidia-smi once, first: each nvidia-smi starts NVML anew (without
# persistence mode the driver is loaded for each, nvidia-smi(1)). `-L` and `--version` run only
# where its rows leave out what they would say, decided here in the shell (one round trip):
# `-L` where a row is not a GPU's (NVML's failure, a GPU without a handle: -L's own words then)
# or a GPU is in MIG mode (only -L lists MIG devices); `--version` where a row's driver_version
# is not a plain version. The query's driver_version equals --version's driver on every
# recording of both from one machine, 610's deprecation included: on 610.57.04 --version says
# 'DRIVER version : Deprecated, see "KMD version"' while the query's driver_version and
# kmd_version both print 610.57.04 (tests/fixtures/gpu/*610.57.04*).
_QUERY_FIRST = (
    "gpurig_smi= gpurig_query= gpurig_query_rc= gpurig_list=1 gpurig_version=1\n"
    "if command -v nvidia-smi >/dev/null 2>&1; then gpurig_smi=1\n"
    f"gpurig_query=$(bounded {gpu_parse.QUERY_GPU_COMMAND} 2>&1); gpurig_query_rc=$?\nfi\n"
    'if [ "$gpurig_query_rc" = 0 ]; then gpurig_list= gpurig_version=\n'
    f"while IFS=, read -r {_columns('uuid', 'driver_version', 'mig.mode.current')}; do\n"
    f"case {_column('uuid')} in GPU-*) ;; *) gpurig_list=1 gpurig_version=1 ;; esac\n"
    f"case {_column('mig.mode.current')} in "
    f"{'|'.join(map(shlex.quote, gpu_parse.NO_MIG))}) ;; "
    "*) gpurig_list=1 ;; esac\n"
    f"case {_column('driver_version')} in ''|*[!0-9.]*) gpurig_version=1 ;; esac\n"
    "done <<GPURIG_QUERY\n$gpurig_query\nGPURIG_QUERY\nfi"
)


class NvidiaGpus(Sectioned[dict[str, Any]]):
    """The GPU query: whether nvidia-smi exists (`smi`); the GPUs with their MIG devices
    (`listing`, strict: `nvidia-smi -L`'s, gpu_parse.parse_smi_list, or where the query's rows
    say all -L would, gpu_parse.parse_query_listing); one `--query-gpu` row per GPU
    (`gpus`); the loaded kernel module (/proc/driver/nvidia/version); what the container
    toolkit sees (`toolkit_view`, `nvidia-container-cli info` where the toolkit is installed:
    the only GPU view on Tegra/Jetson hosts, which have no nvidia-smi). `present`: the listing
    names a GPU, or without nvidia-smi the toolkit lists a device; `driver`: the driver
    version then (--version's where it ran, else the query's, else the module's, else the
    toolkit's); `error`: why no GPU is present. A tool's refusal is kept as `*_error`, never
    guessed around."""

    def command(self) -> str:
        smi = 'if [ -n "$gpurig_smi" ]'
        parts = {
            "list": f'{smi}; then if [ -n "$gpurig_list" ]; then echo ran\n'
                    "bounded nvidia-smi -L 2>&1\nelse echo query; fi; fi",
            "query": f"{smi}; then echo ran\nprintf '%s\\n' \"$gpurig_query\"\nfi",
            "version": f'{smi} && [ -n "$gpurig_version" ]; then echo ran\n'
                       "bounded nvidia-smi --version 2>/dev/null\nfi",
            "module": f"{LINES}\ngpurig_lines /proc/driver/nvidia/version 2>/dev/null",
            "toolkit": _tool("nvidia-container-cli", "info 2>&1"),
        }  # fmt: skip
        sections = [section("part", label, body) for label, body in parts.items()]
        return "\n".join([START, BOUNDED, _QUERY_FIRST, *sections])

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        listed, query = _ran(parts, "list"), _ran(parts, "query")
        gpus, gpus_error = _refused(gpu_parse.parse_query_gpu_csv, query)
        if (parts.get("list") or "").strip() == "query":  # the query's rows said all -L would
            listed = query
            listing, listing_error = _refused(gpu_parse.parse_query_listing, query)
        else:
            listing, listing_error = _refused(gpu_parse.parse_smi_list, listed)
        version, _ = _refused(gpu_parse.parse_smi_version, _ran(parts, "version"))
        module_text = parts.get("module") or ""
        module, module_error = _refused(gpu_parse.parse_proc_driver_version, module_text)
        view, view_error = _refused(gpu_parse.parse_container_cli_info, _ran(parts, "toolkit"))
        present = bool(listing) or (listed is None and bool(view and view["devices"]))
        if present:
            error = None
        elif listed is None:
            error = "nvidia-smi is not installed"
        else:
            error = listing_error or listed.strip() or "no GPU listed"
        # The driver: --version's where it ran (610+ names it KMD), else the query's, else the
        # module's (an nvidia-smi too old for --version); never a Jetson's L4T release.
        drivers = [version.driver if version else None]
        drivers += [g.get("driver_version") for g in gpus or []]
        l4t = bool(module) and gpu_parse.is_l4t_module(module, module_text)
        drivers.append(module.version if module and not l4t else None)
        drivers.append(view["driver"] if view else None)
        return {
            "smi": listed is not None,
            "present": present,
            "listing": [asdict(g) for g in listing] if listing is not None else None,
            "listing_error": listing_error,
            "gpus": gpus,
            "gpus_error": gpus_error,
            "nvml_mismatch": gpu_parse.parse_nvml_mismatch(query or ""),
            "kernel_module": {**asdict(module), "l4t": l4t} if module else None,
            "kernel_module_error": module_error,
            "toolkit_view": view,
            "toolkit_view_error": view_error,
            "driver": next((d for d in drivers if d), None) if present else None,
            "error": error,
        }


class GpuHealth(Sectioned[dict[str, Any]]):
    """`nvidia-smi -q -x`: each GPU's health fields, active clock throttle reasons and volatile
    uncorrectable ECC errors (by PCI id). Empty where nvidia-smi is missing or cannot start
    NVML (NvidiaGpus says why); XML of another shape is refused."""

    def command(self) -> str:
        return self.sectioned({"xml": _smi("-q -x 2>&1")})

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        text = _ran(parts, "xml") or ""
        if not text.strip() or gpu_parse.smi_failed(text):
            return {"health": [], "throttle": {}, "ecc_uncorrectable": {}}
        return {
            "health": [asdict(g) for g in gpu_parse.parse_health_xml(text)],
            "throttle": gpu_parse.parse_throttle_reasons(text),
            "ecc_uncorrectable": gpu_parse.parse_ecc_uncorrectable(text),
        }


class GpuProcesses(Sectioned[Optional[list[dict[str, Any]]]]):
    """The compute processes each GPU runs (None: nvidia-smi missing or unable to say)."""

    def command(self) -> str:
        query = "--query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits"
        return self.sectioned({"apps": _smi(query, "2>&1")})

    @staticmethod
    def parse(parts: Mapping[str, str]) -> list[dict[str, Any]] | None:
        text = _ran(parts, "apps")
        return None if text is None else gpu_parse.parse_compute_apps(text)


class NvlinkStatus(Sectioned[list[dict[str, Any]]]):
    """`nvidia-smi nvlink -s`: each GPU's links and which are down (none without NVLink)."""

    def command(self) -> str:
        return self.sectioned({"nvlink": _smi("nvlink -s 2>/dev/null")})

    @staticmethod
    def parse(parts: Mapping[str, str]) -> list[dict[str, Any]]:
        return [asdict(g) for g in gpu_parse.parse_nvlink_status(_ran(parts, "nvlink") or "")]


class GpuDevices(Sectioned[dict[str, Any]]):
    """Device nodes CUDA needs (/dev/nvidia-uvm, made on first use by nvidia-modprobe) and the
    NVSwitches that make the fabric manager mandatory."""

    def command(self) -> str:
        return self.sectioned({
            "uvm": "[ -c /dev/nvidia-uvm ] && echo uvm",
            "nvswitch": "for dev in /dev/nvidia-nvswitch[0-9]*; do [ -c \"$dev\" ] && echo x; done",
        })  # fmt: skip

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        return {
            "uvm_device": (parts.get("uvm") or "").strip() == "uvm",
            "nvswitch_devices": (parts.get("nvswitch") or "").split().count("x"),
        }


class RebootRequired(Sectioned[dict[str, Any]]):
    """Whether the host waits for a reboot after package upgrades, and for which packages."""

    def command(self) -> str:
        return self.sectioned({
            "flag": "[ -f /var/run/reboot-required ] && echo yes",
            "packages": f"{LINES}\ngpurig_lines /var/run/reboot-required.pkgs 2>/dev/null",
        })  # fmt: skip

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        return {
            "required": (parts.get("flag") or "").strip() == "yes",
            "packages": [
                p.strip() for p in (parts.get("packages") or "").splitlines() if p.strip()
            ],
        }


class NvidiaModule(Sectioned[dict[str, Any]]):
    """The NVIDIA kernel module on disk for the running kernel (`modinfo -F version nvidia`;
    `modinfo`: whether it could be asked) and `dkms status`: a driver upgraded under a running
    kernel shows here."""

    def command(self) -> str:
        return self.sectioned({
            "modinfo": "if command -v modinfo >/dev/null 2>&1; then echo modinfo\n"
                       "modinfo -F version nvidia 2>/dev/null\nfi",
            "dkms": f"{BOUNDED}\ncommand -v dkms >/dev/null 2>&1 && "
                    "bounded dkms status 2>/dev/null",
        })  # fmt: skip

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        asked = (parts.get("modinfo") or "").splitlines()
        return {
            "modinfo": asked[:1] == ["modinfo"],
            "built": "\n".join(asked[1:]).strip() or None,
            "dkms": part_text(parts, "dkms"),
        }


class KernelLog(Sectioned[dict[str, Any]]):
    """GPU events in the kernel log since boot: Xid lines, and the 'fallen off the bus'
    messages drivers also log without an Xid (the multi-line form names the GPU on its 'The
    NVIDIA GPU' line); NVSwitch SXid lines and hung-task reports with the lines after them
    (gpurig.read.interconnect_parse). dmesg may be restricted to root: journalctl -k -b is
    the fallback."""

    def command(self) -> str:
        # The log is piped to the filter, never held in a shell variable: dash copying a
        # whole kernel log (100 KB and more) into one cost a node contract ~10 ms. dmesg
        # refused (restricted to root) prints nothing, so journalctl's log is the only one.
        # The probe-time message passes with its next two lines whatever they say: the parser
        # takes its 'fallen off the bus' line only there (gpu_parse.parse_fallen_off_bus),
        # never a line that something else's text moved under it.
        log = (
            f"{BOUNDED}\n"
            "gpurig_klog() {\n"
            "if command -v dmesg >/dev/null 2>&1 && dmesg 2>/dev/null; then :\n"
            "elif command -v journalctl >/dev/null 2>&1; then "
            "bounded journalctl -k -b --no-pager -q 2>/dev/null; fi\n"
            "}\n"
            "gpurig_klog | sed -n -e '/NVRM: Xid/{p;d;}' "
            "-e '/fallen off the bus/{p;d;}' -e '/NVRM: The NVIDIA GPU/,+2{p;d;}' "
            f"-e '/{interconnect_parse.HUNG_TASK_SED}/,+{interconnect_parse.hung_task_lines()}"
            "{p;d;}' "
            "-e '/: SXid (/{p;d;}'"
        )
        return self.sectioned({"gpu_lines": log})

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        text = parts.get("gpu_lines") or ""
        return {
            "xids": [asdict(e) for e in gpu_parse.parse_xid_lines(text)],
            "fallen_off_bus": [asdict(e) for e in gpu_parse.parse_fallen_off_bus(text)],
            "sxids": [asdict(e) for e in interconnect_parse.parse_sxid_lines(text)],
            "hung_tasks": [
                {**asdict(t), "gpu_lines": t.gpu_lines}
                for t in interconnect_parse.parse_hung_tasks(text)
            ],
        }
