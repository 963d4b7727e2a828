"""Checks of what the converge cannot change: disk and inode headroom, /dev/shm, login shells,
GPU presence and health, driver/CUDA/torch compatibility, crashing containers, node health.

Each rule is pure `rule(spec, read) -> [Finding]`: it reads the facts it judges through the same
`read(FactClass, **kwargs)` as the plans (the host's one-round-trip snapshot, or a Recorder that
lists what a spec needs), so every rule is unit-tested on plain values; like the plans, a rule
reads by the spec alone, before it looks at what it read. What the converge manages is judged by
its plans (gpurig.plans), never here. Thresholds and GPU health lists come from
`gpurig/data/drift.yaml`, compatibility rules from gpurig.compat.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from facts.gpurig_container import ContainerInspect, ContainerTorch
from facts.gpurig_host import Unreadable
from facts.gpurig_node import DiskSpace, EngineSocket, LoginShell, ShmSize
from facts.gpurig_nvidia import GpuHealth, GpuProcesses, NvidiaGpus
from gpurig import gpu_checks, node_checks
from gpurig.compat import Finding, Severity, check_kernel_module, judge
from gpurig.datafiles import table
from gpurig.hostkeys import changed_message
from gpurig.inventory import parse_size
from gpurig.plans.engine import PODMAN_SOCKET

Read = Callable[..., Any]
Spec = Mapping[str, Any]

# What odd host output raises while it is judged (a parser's refusal): that part becomes
# `state.unreadable`. A KeyError or TypeError is a bug in gpurig and fails its tests.
ODD_OUTPUT = (Unreadable, ValueError)

# Every id a check can carry (tests check each one has a case that makes it fire).
CHECK_IDS = (
    "host.unreachable", "host.key_changed", "host.sudo_password", "host.not_root",
    "state.unreadable",
    "core_dumps.login_shell", "disk.free", "disk.inodes", "shm.size", "engine.api",
    "container.restarting", "gpu.missing", "gpu.unexpected", "compat.kernel_module",
    "compat.driver_cuda", "compat.torch_arch", "gpu.throttle", "gpu.ecc",
    "gpu.zombie_vram", *gpu_checks.rules()["checks"], *node_checks.rules()["checks"],
)  # fmt: skip


def rules() -> dict[str, Any]:
    """Thresholds and GPU health lists, each with its source, from gpurig/data/drift.yaml."""
    return table("drift.yaml")


def finding(
    id: str, severity: Severity, message: str, expected: Any, actual: Any, fix: str
) -> Finding:
    """A Finding with expected/actual rendered as text (reports print them as they are)."""
    return Finding(id, severity, message, str(expected), str(actual), fix)


def unreachable(error: str) -> Finding:
    """The finding for a host that could not be reached; `evaluate` never sees such a host."""
    return finding(
        "host.unreachable",
        "error",
        f"cannot connect: {error}",
        "SSH connection",
        error,
        "check the host is up, its address, port and key, and that its host key is recorded",
    )


def sudo_refused_message(host_name: str) -> str:
    """What to tell the operator when a host's sudo asked for a password."""
    return (
        f"{host_name}: sudo asks this login for a password; gpurig never sends one (log in as "
        "root, give the login passwordless sudo, or declare `scope: user` to manage only what "
        "the login owns)"
    )


def sudo_password(name: str) -> Finding:
    """The finding for a login whose sudo asks for a password (never sent: pyinfra_guard)."""
    return finding(
        "host.sudo_password",
        "error",
        sudo_refused_message(name),
        "root, passwordless sudo, or `scope: user`",
        "sudo: a password is required",
        "log in as root, give the login passwordless sudo, or declare `scope: user` in its spec",
    )


def key_changed(name: str, inventory: str, error: str) -> Finding:
    """The finding for a host whose host key is not the recorded one: never connect to it."""
    return finding(
        "host.key_changed",
        "error",
        changed_message(name, inventory),
        f"the host key recorded in {inventory}",
        error,
        "check with the provider; if the machine was re-created, remove its host_key and run "
        "`gpurig onboard` again",
    )


def _gib(size: int | None) -> str:
    return "unknown" if size is None else f"{size / 1024**3:.1f} GiB"


def _core_dumps(spec: Spec, read: Read) -> Iterator[Finding]:
    if spec["core_dumps"] != "disabled":
        return
    login = read(LoginShell)["ulimit_c"]
    if login not in ("0", None):
        yield finding(
            "core_dumps.login_shell",
            "warn",
            "a login shell may still write core files, which can fill the disk",
            "ulimit -c 0",
            f"ulimit -c {login}",
            "find what raises the limit after /etc/profile.d/gpurig-core.sh (~/.bashrc, "
            "/etc/bash.bashrc) and remove it",
        )


def disk_paths(spec: Spec) -> list[str]:
    """Where headroom is judged: the root, /tmp and every declared checkout."""
    return ["/", "/tmp", *spec["repos"]]


def _disks(spec: Spec, read: Read) -> Iterator[Finding]:
    checks = spec.get("checks") or {}
    free_min = parse_size(checks["disk_free_min"]) if "disk_free_min" in checks else None
    inode_pct = checks.get("inodes_free_min_pct")
    if free_min is None and inode_pct is None:
        return
    seen: set[str] = set()
    for disk in read(DiskSpace, paths=disk_paths(spec)):
        mount = disk.get("mount") or disk["path"]
        if mount in seen or not disk.get("exists"):
            continue
        seen.add(mount)
        free = disk.get("free_bytes")
        if free_min is not None and free is not None and free < free_min:
            yield finding(
                "disk.free",
                "error",
                f"{mount} has {_gib(free)} free, below the declared minimum",
                f">= {checks['disk_free_min']}",
                _gib(free),
                f"free space on {mount}: old checkpoints, core files, caches, docker images",
            )
        total, ifree = disk.get("inodes_total"), disk.get("inodes_free")
        if (
            inode_pct is not None
            and total
            and ifree is not None
            and ifree * 100 < inode_pct * total
        ):
            yield finding(
                "disk.inodes",
                "error",
                f"{mount} is running out of inodes (many small files)",
                f">= {inode_pct}% free",
                f"{ifree * 100 / total:.1f}% free",
                f"remove small-file caches on {mount} (pip/uv caches, __pycache__, ray logs)",
            )


def _shm(spec: Spec, read: Read) -> Iterator[Finding]:
    sizes = [
        parse_size(c["shm_size"])
        for c in (spec.get("containers") or {}).values()
        if "shm_size" in c
    ]
    host = read(ShmSize)["size_bytes"] if sizes else None
    if sizes and host is not None and host < max(sizes):
        yield finding(
            "shm.size",
            "warn",
            "the host's /dev/shm is smaller than a declared container shm: dataloaders may SIGBUS",
            f">= {_gib(max(sizes))}",
            _gib(host),
            "enlarge /dev/shm (mount -o remount,size=...) or lower the containers' shm_size",
        )


def _engine(spec: Spec, read: Read) -> Iterator[Finding]:
    if spec["engine"] != "podman" or not spec["podman_socket"]:
        return
    if read(EngineSocket, path=PODMAN_SOCKET)["answers"] is False:
        yield finding(
            "engine.api",
            "error",
            "the Podman API socket exists but does not answer",
            f"{PODMAN_SOCKET} answering _ping",
            "no answer",
            "read `journalctl -u podman.socket -u podman.service`; restart podman.socket",
        )


def _containers(spec: Spec, read: Read) -> Iterator[Finding]:
    engine = spec["engine"]
    for name, found in node_checks.container_reads(spec, read, ContainerInspect).items():
        inspect = found["inspect"] or {}
        state = inspect.get("State") or {}
        restarts = inspect.get("RestartCount") or 0
        if state.get("Restarting") or restarts > 0:
            yield finding(
                "container.restarting",
                "warn",
                f"container {name} has restarted: its command crashes",
                "0 restarts",
                f"{restarts} restarts" + (", restarting now" if state.get("Restarting") else ""),
                f"read `{engine} logs {name}` for the crash",
            )


def _gpu_presence(spec: Spec, read: Read) -> Iterator[Finding]:
    wanted = spec["gpu"]
    gpu = read(NvidiaGpus)
    found = len(gpu["gpus"] or [])
    if wanted == "required" and not found:
        error = gpu["gpus_error"]
        yield finding(
            "gpu.missing",
            "error",
            "a GPU is required but nvidia-smi lists none",
            ">= 1 GPU",
            f"0 GPUs{f' ({error})' if error else ''}",
            "check the NVIDIA driver is installed and loaded (nvidia-smi, dmesg)",
        )
    if wanted == "absent" and found:
        yield finding(
            "gpu.unexpected",
            "warn",
            "the spec says no GPU but the host has some",
            "no GPU",
            f"{found} GPUs",
            "set gpu: auto or required for this host",
        )


def _compat(spec: Spec, read: Read) -> Iterator[Finding]:
    gpu = read(NvidiaGpus)
    torches = node_checks.container_reads(spec, read, ContainerTorch)
    module = gpu["kernel_module"] or {}
    gpus = gpu["gpus"] or []
    driver = gpus[0].get("driver_version") if gpus else gpu["nvml_mismatch"]
    if not driver:
        return
    if module and not module["l4t"]:  # a Jetson's module line names its L4T release
        yield from check_kernel_module(driver, module["version"])
    # A MIG slice is judged by its parent GPU's capability (it has none of its own).
    capabilities = gpu_checks.job_capabilities(gpu)
    for torch in torches.values():
        torch = torch or {}
        if not torch.get("cuda"):
            continue
        for capability in capabilities or [None]:
            arches = torch.get("arch_list") if capability else None
            yield from judge(driver, None, torch["cuda"], arches, capability)[1]


def _gpu_health(_spec: Spec, read: Read) -> Iterator[Finding]:
    gpu, health, apps = read(NvidiaGpus), read(GpuHealth), read(GpuProcesses)
    harmful = set(rules()["harmful_throttle_reasons"])
    throttled = {pci: sorted(harmful & set(r)) for pci, r in health["throttle"].items()}
    throttled = {pci: r for pci, r in throttled.items() if r}
    if throttled:
        yield finding(
            "gpu.throttle",
            "warn",
            "GPU clocks are held down for hardware reasons (heat or power)",
            "no hardware slowdown",
            "; ".join(f"{pci}: {', '.join(r)}" for pci, r in sorted(throttled.items())),
            "check cooling, fans and power delivery; ask the provider to inspect the node",
        )
    ecc = {pci: n for pci, n in health["ecc_uncorrectable"].items() if n}
    if ecc:
        yield finding(
            "gpu.ecc",
            "error",
            "GPU memory reports uncorrectable ECC errors since the driver loaded",
            "0 uncorrectable ECC errors",
            "; ".join(f"{pci}: {n}" for pci, n in sorted(ecc.items())),
            "drain the host and reset the GPU; if errors return, have it replaced",
        )
    busy = {a["gpu_uuid"] for a in apps or []}
    floor = rules()["zombie_vram_min_mib"]
    zombies = [
        g
        for g in gpu["gpus"] or []
        if g.get("mig.mode.current") != "Enabled"
        and int(g.get("memory.used") or 0) >= floor
        and g.get("uuid") not in busy
    ]
    if apps is not None and zombies:
        yield finding(
            "gpu.zombie_vram",
            "warn",
            "GPU memory is in use with no compute process: a dead process still holds it",
            "no memory without a process",
            "; ".join(f"GPU {g.get('index')}: {g.get('memory.used')} MiB" for g in zombies),
            "find the holder (fuser -v /dev/nvidia*) and kill it, or reset the GPU",
        )


_RULES: tuple[Callable[[Spec, Read], Iterator[Finding]], ...] = (
    _core_dumps,
    _disks,
    _shm,
    _engine,
    _containers,
    _gpu_presence,
    _compat,
    _gpu_health,
    *gpu_checks.RULES,  # GPU health with remediations (gpurig/gpu_checks.py)
    *node_checks.RULES,  # OOM kills, cgroup leaks, per-cpu memory, shadowed imports
)


def state_unreadable(what: str, exc: Exception) -> Finding:
    """A part of the host's state whose output could not be read (`exc` names the fact)."""
    return finding(
        "state.unreadable",
        "error",
        f"{what}: the host's output could not be read",
        "output gpurig can parse",
        str(exc)[:300],
        "run the converge with -v to see the host's output, or inspect the host by hand",
    )


def check(spec: Spec, read: Read) -> list[Finding]:
    """Every check's finding for one reachable host. A rule that meets a fact the host's
    output made unreadable gives one `state.unreadable` naming it; the others still judge."""
    findings: list[Finding] = []
    for rule in _RULES:
        try:
            found = list(rule(spec, read))
        except ODD_OUTPUT as exc:
            found = [state_unreadable("checks", exc)]
        for item in found:
            if item not in findings:  # the same compat rule can fire for two containers
                findings.append(item)
    return findings
