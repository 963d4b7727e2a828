"""The health probe: what drift and onboarding check but the converge does not manage.

`probe.sh` prints one JSON document with raw tool outputs as strings; `process()` parses those
with `gpurig.gpu_parse`, so the parsing is tested on recordings from real GPU machines while the
script stays plain sh. It runs as one section of the host's one round trip (gpurig_host).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pyinfra.api import FactBase

from gpurig import gpu_parse, node_parse
from gpurig.user_scope import CONTAINER_HOST, is_user

SCRIPT_PATH = Path(__file__).with_name("probe.sh")

# One declared environment's import check: (checkout, venv, module names).
Imports = Sequence[Any]


def _imports_argument(checkout: str, venv: str, modules: Iterable[str]) -> str:
    """`CHECKOUT<TAB>VENV<TAB>name name`: names checked here, before they reach a command."""
    for path in (checkout, venv):
        if not path.startswith("/") or any(ord(c) < 32 or c == "\x7f" for c in path):
            raise ValueError(f"imports: not an absolute path without control characters: {path!r}")
    names = list(modules)
    bad = [name for name in names if not node_parse.MODULE_NAME.fullmatch(name)]
    if bad or not names:
        raise ValueError(f"imports: not top-level module names: {bad or names!r}")
    return f"{checkout}\t{venv}\t{' '.join(names)}"


def script_arguments(
    engine: str | None = None,
    paths: Iterable[str] = (),
    containers: Iterable[str] = (),
    imports: Iterable[Imports] = (),
    bound: int | None = None,
) -> list[str]:
    """probe.sh's command line for these inputs (also what to type to run it by hand)."""
    args = ["--gpu-fields", ",".join(gpu_parse.QUERY_GPU_FIELDS)]
    if bound is not None:
        args += ["--bound", str(int(bound))]
    if engine and engine != "none":
        args += ["--engine", engine]
    for flag, values in (("--path", paths), ("--container", containers)):
        for value in values:
            args += [flag, value]
    for checkout, venv, modules in imports:
        args += ["--imports", _imports_argument(checkout, venv, modules)]
    return args


def probe_kwargs(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What the probe looks at for this (normalised) spec: headroom paths, containers and the
    declared environments' imports."""
    imports = [
        [path, repo["python"]["venv"], list(repo["python"]["imports"])]
        for path, repo in spec["repos"].items()
        if (repo.get("python") or {}).get("imports")
    ]
    return {
        "engine": spec["engine"],
        "paths": ["/tmp", *spec["repos"]],
        "containers": list(spec["containers"]),
        **({"imports": imports} if imports else {}),
        **({"user": True} if is_user(spec) else {}),
    }


def _lines(text: str | None) -> list[str]:
    return [line for line in (text or "").splitlines() if line.strip()]


def _loads(text: str | None) -> tuple[Any, str | None]:
    """JSON embedded as a string by the script: (value, None) or (None, why not)."""
    if not text:
        return None, None
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, f"invalid JSON: {exc}"


def _int(text: str | None) -> int | None:
    return int(text) if text and re.fullmatch(r"-?[0-9]+", text.strip()) else None


def _checked(parse: Callable[..., Any], *texts: str | None) -> tuple[Any, str | None]:
    """(parse(*texts), None), or (None, the parser's reason) for output of another shape."""
    try:
        return parse(*texts), None
    except ValueError as exc:
        return None, str(exc)


def parse_cgroup(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The cgroup section typed: limits and counters as ints, the leak and percpu readings."""
    cgroup = dict(raw)
    for key in ("memory_limit", "memory_usage"):
        cgroup[key] = _int(cgroup.get(key))  # "max" (v2, no limit) becomes None
    cgroup["oom_kill"], cgroup["oom_kill_error"] = _checked(node_parse.count, raw.get("oom_kill"))
    cgroup["count"], cgroup["count_error"] = _checked(
        node_parse.cgroup_count, raw.get("proc_cgroups"), raw.get("stat")
    )
    cgroup["percpu"], cgroup["percpu_error"] = _checked(
        node_parse.percpu_bytes, raw.get("percpu"), raw.get("meminfo_percpu")
    )
    for key in ("proc_cgroups", "stat", "meminfo_percpu"):
        cgroup.pop(key, None)
    return cgroup


def parse_imports(raw: Mapping[str, Any]) -> dict[str, Any]:
    """One environment's import report: parsed, or why not (None when its python is absent)."""
    entry = {"checkout": raw.get("checkout"), "python": raw.get("python"),
             "run_as": _int(raw.get("run_as")), "refused": raw.get("refused") or None}  # fmt: skip
    report, error = None, None
    if raw.get("ran") is True and not raw.get("report"):
        error = "the environment's python printed nothing"
    elif raw.get("ran") is True:
        report, error = _checked(node_parse.parse_imports_report, raw["report"])
    return {**entry, "report": report, "error": error}


def parse_gpu(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Typed GPU facts from the raw outputs; a parser's refusal becomes an `*_error` string."""
    gpu: dict[str, Any] = {"nvidia_smi": raw.get("nvidia_smi", False)}
    parsers = {
        "gpus": (raw.get("query"), gpu_parse.parse_query_gpu_csv),
        "kernel_module": (raw.get("proc_version"), gpu_parse.parse_proc_driver_version),
        "throttle": (raw.get("smi_xml"), gpu_parse.parse_throttle_reasons),
        "ecc_uncorrectable": (raw.get("smi_xml"), gpu_parse.parse_ecc_uncorrectable),
        "health": (raw.get("smi_xml"), gpu_parse.parse_health_xml),
        "container_cli": (raw.get("container_cli"), gpu_parse.parse_container_cli_info),
        "listing": (raw.get("listing"), gpu_parse.parse_smi_list),
    }
    for key, (text, parser) in parsers.items():
        gpu[key], gpu[f"{key}_error"] = None, None
        if text:
            try:
                value = parser(text)
            except (ValueError, SyntaxError) as exc:  # ET.ParseError is a SyntaxError
                gpu[f"{key}_error"] = str(exc)
            else:
                gpu[key] = vars(value) if key == "kernel_module" else value
    for key in ("health", "listing"):
        if gpu[key] is not None:
            gpu[key] = [asdict(g) for g in gpu[key]]
    gpu["kernel_module_l4t"] = bool(gpu["kernel_module"]) and gpu_parse.is_l4t_module(
        gpu_parse.KernelModule(**gpu["kernel_module"]), raw.get("proc_version") or ""
    )
    gpu["nvml_mismatch"] = gpu_parse.parse_nvml_mismatch(raw.get("query") or "")
    gpu["compute_apps"] = None
    if raw.get("nvidia_smi"):
        apps = [[cell.strip() for cell in line.split(",")] for line in _lines(raw["compute_apps"])]
        gpu["compute_apps"] = [
            {"gpu_uuid": row[0], "pid": _int(row[1]), "used_mib": _int(row[2])}
            for row in apps
            if len(row) == 3
        ]
    gpu["kernel_log"] = raw.get("kernel_log")
    gpu["xids"] = [vars(e) for e in gpu_parse.parse_xid_lines(raw.get("xid_lines") or "")]
    gpu["fallen_off_bus"] = [
        vars(e) for e in gpu_parse.parse_fallen_off_bus(raw.get("xid_lines") or "")
    ]
    gpu["nvlink"] = [vars(g) for g in gpu_parse.parse_nvlink_status(raw.get("nvlink") or "")]
    for key in ("uvm_device", "reboot_required", "modinfo"):  # None: not read, not "absent"
        gpu[key] = raw[key] if isinstance(raw.get(key), bool) else None
    gpu["nvswitch_devices"] = raw.get("nvswitch_devices") or 0
    for key in ("fabricmanager", "dkms", "module_built"):
        gpu[key] = (raw.get(key) or "").strip() or None
    gpu["reboot_required_pkgs"] = _lines(raw.get("reboot_required_pkgs"))
    return gpu


# The document's shape: what each member must be (host output is checked, never assumed).
SHAPE = {"host": dict, "cgroup": dict, "disks": list, "core_dumps": dict,
         "engine": dict, "containers": list, "imports": list, "gpu": dict}  # fmt: skip


def _shaped(document: Mapping[str, Any]) -> None:
    """Refuse a document whose members are not the script's shapes (ValueError)."""
    for key, kind in SHAPE.items():
        value = document.get(key)
        if value is not None and not isinstance(value, kind):
            raise ValueError(f"probe member {key!r} is not a JSON {kind.__name__}")
        if kind is list and any(not isinstance(item, dict) for item in value or []):
            raise ValueError(f"probe member {key!r} holds something other than objects")


def parse_probe(document: Mapping[str, Any]) -> dict[str, Any]:
    """Turn probe.sh's document into typed data: numbers as ints, embedded JSON parsed."""
    _shaped(document)
    probe = dict(document)
    probe["cgroup"] = parse_cgroup(probe.get("cgroup") or {})
    containers = []
    for raw in probe.get("containers") or []:
        torch, torch_error = _loads(raw.get("torch"))
        oom_kill, oom_error = _checked(node_parse.count, raw.get("oom_kill"))
        containers.append(
            {"name": raw["name"], "engine": raw.get("engine"), "torch": torch, "error": torch_error,
             "oom_kill": oom_kill, "oom_kill_error": oom_error}
        )  # fmt: skip
    probe["containers"] = containers
    probe["imports"] = [parse_imports(raw) for raw in probe.get("imports") or []]
    probe["gpu"] = parse_gpu(probe.get("gpu") or {})
    return probe


class Probe(FactBase[dict[str, Any]]):
    """Everything the drift check reads from one host, gathered by one sh script."""

    shell_executable = "sh"

    def command(
        self,
        engine: str | None = None,
        paths: Iterable[str] = (),
        containers: Iterable[str] = (),
        imports: Iterable[Imports] = (),
        user: bool = False,
        bound: int | None = None,
    ) -> str:
        args = script_arguments(engine, paths, containers, imports, bound)
        # scope: user: containers through the user's API socket, and no `sudo -n true`: a
        # user-scope login never tries sudo.
        scope = f"export {CONTAINER_HOST} GPURIG_NO_SUDO=1\n" if user else ""
        return f"{scope}set -- {shlex.join(args)}\n{SCRIPT_PATH.read_text(encoding='utf-8')}"

    def process(self, output: list[str]) -> dict[str, Any]:
        """The typed probe, or `{"error": ...}` when the output is not the script's JSON."""
        try:
            document = json.loads("\n".join(output))
        except ValueError as exc:
            return {"error": f"probe printed no JSON document: {exc}"}
        if not isinstance(document, dict):
            return {"error": "probe printed JSON that is not an object"}
        return parse_probe(document)
