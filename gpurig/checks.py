"""Checks of what the converge cannot change: disk and inode headroom, /dev/shm, login shells,
GPU presence and health, driver/CUDA/torch compatibility, crashing containers, node health.

Pure (no I/O) over the probe's document (facts/probe.py), so every rule is unit-tested on plain
dicts; what the converge manages is judged by its plans (gpurig.plans), never here. Thresholds
and GPU health lists come from `gpurig/data/drift.yaml`, compatibility rules from gpurig.compat.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gpurig import gpu_checks, node_checks
from gpurig.compat import Finding, Severity, check_kernel_module, judge
from gpurig.datafiles import table
from gpurig.hostkeys import changed_message
from gpurig.inventory import parse_size
from gpurig.user_scope import is_user

Probe = Mapping[str, Any]
Spec = Mapping[str, Any]

# Every id a check can carry (tests check each one has a case that makes it fire).
CHECK_IDS = (
    "host.unreachable", "host.key_changed", "host.not_root", "probe.failed", "state.unreadable",
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


def _core_dumps(spec: Spec, probe: Probe) -> Iterator[Finding]:
    login = (probe.get("core_dumps") or {}).get("login_ulimit_c")
    if spec["core_dumps"] == "disabled" and login not in ("0", None):
        yield finding(
            "core_dumps.login_shell",
            "warn",
            "a login shell may still write core files, which can fill the disk",
            "ulimit -c 0",
            f"ulimit -c {login}",
            "find what raises the limit after /etc/profile.d/gpurig-core.sh (~/.bashrc, "
            "/etc/bash.bashrc) and remove it",
        )


def _disks(spec: Spec, probe: Probe) -> Iterator[Finding]:
    checks = spec.get("checks") or {}
    free_min = parse_size(checks["disk_free_min"]) if "disk_free_min" in checks else None
    inode_pct = checks.get("inodes_free_min_pct")
    seen: set[str] = set()
    for disk in probe.get("disks") or []:
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


def _shm(spec: Spec, probe: Probe) -> Iterator[Finding]:
    sizes = [
        parse_size(c["shm_size"])
        for c in (spec.get("containers") or {}).values()
        if "shm_size" in c
    ]
    host = (probe.get("shm") or {}).get("size_bytes")
    if sizes and host is not None and host < max(sizes):
        yield finding(
            "shm.size",
            "warn",
            "the host's /dev/shm is smaller than a declared container shm: dataloaders may SIGBUS",
            f">= {_gib(max(sizes))}",
            _gib(host),
            "enlarge /dev/shm (mount -o remount,size=...) or lower the containers' shm_size",
        )


def _engine(spec: Spec, probe: Probe) -> Iterator[Finding]:
    engine = probe.get("engine") or {}
    socket = engine.get("podman_socket") or {}
    if is_user(spec):
        return  # the user's own socket is the engine plan's (it asks for _ping itself)
    if spec["engine"] == "podman" and spec["podman_socket"] and socket.get("answers") is False:
        yield finding(
            "engine.api",
            "error",
            "the Podman API socket exists but does not answer",
            f"{socket.get('path')} answering _ping",
            "no answer",
            "read `journalctl -u podman.socket -u podman.service`; restart podman.socket",
        )


def _containers(_spec: Spec, probe: Probe) -> Iterator[Finding]:
    for container in probe.get("containers") or []:
        inspect = container.get("inspect") or {}
        state = inspect.get("State") or {}
        restarts = inspect.get("RestartCount") or 0
        name, engine = container["name"], container.get("engine") or "docker"
        if state.get("Restarting") or restarts > 0:
            yield finding(
                "container.restarting",
                "warn",
                f"container {name} has restarted: its command crashes",
                "0 restarts",
                f"{restarts} restarts" + (", restarting now" if state.get("Restarting") else ""),
                f"read `{engine} logs {name}` for the crash",
            )


def _gpus(probe: Probe) -> list[Mapping[str, Any]]:
    return (probe.get("gpu") or {}).get("gpus") or []


def _gpu_presence(spec: Spec, probe: Probe) -> Iterator[Finding]:
    wanted = spec["gpu"]
    found = len(_gpus(probe))
    if wanted == "required" and not found:
        error = (probe.get("gpu") or {}).get("gpus_error")
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


def _compat(_spec: Spec, probe: Probe) -> Iterator[Finding]:
    gpu = probe.get("gpu") or {}
    module = (gpu.get("kernel_module") or {}).get("version")
    gpus = _gpus(probe)
    driver = gpus[0].get("driver_version") if gpus else gpu.get("nvml_mismatch")
    if not driver:
        return
    if module:
        yield from check_kernel_module(driver, module)
    capabilities = sorted({g["compute_cap"] for g in gpus if g.get("compute_cap")})
    for container in probe.get("containers") or []:
        torch = container.get("torch") or {}
        if not torch.get("cuda"):
            continue
        for capability in capabilities or [None]:
            arches = torch.get("arch_list") if capability else None
            yield from judge(driver, None, torch["cuda"], arches, capability)[1]


def _gpu_health(_spec: Spec, probe: Probe) -> Iterator[Finding]:
    gpu = probe.get("gpu") or {}
    harmful = set(rules()["harmful_throttle_reasons"])
    throttled = {pci: sorted(harmful & set(r)) for pci, r in (gpu.get("throttle") or {}).items()}
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
    ecc = {pci: n for pci, n in (gpu.get("ecc_uncorrectable") or {}).items() if n}
    if ecc:
        yield finding(
            "gpu.ecc",
            "error",
            "GPU memory reports uncorrectable ECC errors since the driver loaded",
            "0 uncorrectable ECC errors",
            "; ".join(f"{pci}: {n}" for pci, n in sorted(ecc.items())),
            "drain the host and reset the GPU; if errors return, have it replaced",
        )
    busy = {a.get("gpu_uuid") for a in gpu.get("compute_apps") or []}
    floor = rules()["zombie_vram_min_mib"]
    zombies = [
        g
        for g in _gpus(probe)
        if g.get("mig.mode.current") != "Enabled"
        and int(g.get("memory.used") or 0) >= floor
        and g.get("uuid") not in busy
    ]
    if gpu.get("compute_apps") is not None and zombies:
        yield finding(
            "gpu.zombie_vram",
            "warn",
            "GPU memory is in use with no compute process: a dead process still holds it",
            "no memory without a process",
            "; ".join(f"GPU {g.get('index')}: {g.get('memory.used')} MiB" for g in zombies),
            "find the holder (fuser -v /dev/nvidia*) and kill it, or reset the GPU",
        )


def _gpu_checks(spec: Spec, probe: Probe) -> Iterator[Finding]:
    """The GPU health checks with remediations (gpurig/gpu_checks.py) on the probe's GPU."""
    yield from gpu_checks.check(spec, probe.get("gpu") or {})


def _node_checks(spec: Spec, probe: Probe) -> Iterator[Finding]:
    """OOM kills, cgroup leaks, per-cpu memory, shadowed imports (gpurig/node_checks.py)."""
    yield from node_checks.check(spec, probe)


_RULES: tuple[Callable[[Spec, Probe], Iterator[Finding]], ...] = (
    _core_dumps,
    _disks,
    _shm,
    _engine,
    _containers,
    _gpu_presence,
    _compat,
    _gpu_health,
    _gpu_checks,
    _node_checks,
)


def check(spec: Spec, probe: Probe | None) -> list[Finding]:
    """Every check's finding for one reachable host; a failed probe is one `probe.failed`."""
    if not probe or probe.get("error"):
        reason = (probe or {}).get("error") or "the probe printed nothing (timeout or shell error)"
        return [
            finding(
                "probe.failed",
                "error",
                f"the probe did not complete: {reason}",
                "a probe JSON document",
                reason,
                "run `sh facts/probe.sh` on the host by hand and read its errors",
            )
        ]
    findings: list[Finding] = []
    for rule in _RULES:
        for item in rule(spec, probe):
            if item not in findings:  # the same compat rule can fire for two containers
                findings.append(item)
    return findings
