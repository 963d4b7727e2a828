"""Drift evaluation: a host's declared spec against what its probe saw, as findings.

Pure (no I/O): `gpurig drift` probes, this judges, so every rule is unit-tested on plain dicts.
Thresholds and GPU health lists come from `gpurig/data/drift.yaml`; compatibility rules from
`gpurig.compat`; container field comparisons from `gpurig.container_spec` (shared with converge).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from importlib import resources
from typing import Any

import yaml

from deploys.core_dumps import MANAGED_FILES
from gpurig.compat import Finding, Severity, check_kernel_module, judge
from gpurig.container_spec import FIELDS, diff_container
from gpurig.hostkeys import changed_message
from gpurig.inventory import parse_size

Probe = Mapping[str, Any]
Spec = Mapping[str, Any]

PODMAN_SOCKET = "/run/podman/podman.sock"

# Every id a drift report can carry (tests check each one has a case that makes it fire).
FINDING_IDS = (
    "host.unreachable", "host.key_changed", "probe.failed", "core_dumps.limits",
    "core_dumps.login_shell", "disk.free", "disk.inodes", "shm.size", "engine.missing",
    "engine.socket", "engine.docker_host", "nvidia.runtime", "nvidia.cdi",
    "container.missing", "container.not_running", "container.restarting",
    *(f"container.{field}" for field in FIELDS),
    "gpu.missing", "gpu.unexpected", "compat.kernel_module", "compat.driver_cuda",
    "compat.torch_arch", "gpu.xid", "gpu.throttle", "gpu.ecc", "gpu.zombie_vram",
    "repo.missing", "repo.ref", "repo.dirty", "repo.crlf", "repo.lockfile",
    "cleanup.ray_sessions", "cleanup.core_files", "toolkit.version", "toolkit.hold",
)  # fmt: skip

# How to fix a container field that differs from the spec.
_CONTAINER_FIXES = {
    "image": "pull the pinned digest and recreate the container (gpurig converge)",
    "shm_size": "recreate the container with the declared --shm-size",
}
_RECREATE = "recreate the container from the spec (gpurig converge with recreate allowed)"


@cache
def rules() -> dict[str, Any]:
    """Thresholds and GPU health lists, each with its source, from gpurig/data/drift.yaml."""
    text = (resources.files("gpurig") / "data" / "drift.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


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
    disabled = spec.get("core_dumps", "disabled") == "disabled"
    present = {f["path"]: f for f in probe.get("files") or [] if f.get("present")}
    if disabled:
        wanted = {p: hashlib.sha256(c.encode()).hexdigest() for p, c in MANAGED_FILES.items()}
        wrong = [p for p, digest in wanted.items() if present.get(p, {}).get("sha256") != digest]
        if wrong:
            yield finding(
                "core_dumps.limits",
                "error",
                "gpurig's core dump limit files are missing or edited",
                "present as gpurig writes them",
                f"missing or different: {', '.join(wrong)}",
                "run the converge (deploys/core_dumps.py) to rewrite the limit files",
            )
        login = (probe.get("core_dumps") or {}).get("login_ulimit_c")
        if login != "0":
            yield finding(
                "core_dumps.login_shell",
                "error",
                "a login shell may write core files, which can fill the disk",
                "ulimit -c 0",
                f"ulimit -c {login}",
                "run the converge so /etc/profile.d/gpurig-core.sh sets ulimit -c 0",
            )
    elif present.keys() & MANAGED_FILES.keys():
        yield finding(
            "core_dumps.limits",
            "warn",
            "core dumps are declared enabled but gpurig's limit files still disable them",
            "no gpurig core limit files",
            ", ".join(sorted(present.keys() & MANAGED_FILES.keys())),
            "run the converge to remove gpurig's core limit files",
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
    name = spec.get("engine")
    engine = probe.get("engine") or {}
    if name not in ("docker", "podman"):
        return
    if not (engine.get("installed") or {}).get(name):
        yield finding(
            "engine.missing",
            "error",
            f"{name} is declared but not installed",
            name,
            "not installed",
            f"run the converge to install {name}",
        )
        return
    gpu_containers = [
        c
        for c in (spec.get("containers") or {}).values()
        if c.get("gpus", "none") not in ("none", 0, [])
    ]
    if name == "podman" and spec.get("podman_socket"):
        socket = engine.get("podman_socket") or {}
        if not socket.get("exists") or socket.get("answers") is False:
            yield finding(
                "engine.socket",
                "error",
                "the Podman API socket is declared but does not answer",
                f"{PODMAN_SOCKET} answering",
                "answers: no" if socket.get("exists") else "no socket",
                "enable and start podman.socket (systemctl enable --now podman.socket)",
            )
        want = f"unix://{PODMAN_SOCKET}"
        if engine.get("login_docker_host") != want:
            yield finding(
                "engine.docker_host",
                "error",
                "login shells do not point docker-speaking tools at the Podman socket",
                f"DOCKER_HOST={want}",
                f"DOCKER_HOST={engine.get('login_docker_host') or '(unset)'}",
                "run the converge to set DOCKER_HOST in /etc/profile.d",
            )
    if gpu_containers and name == "docker":
        runtimes = (engine.get("daemon_json") or {}).get("runtimes") or {}
        if "nvidia" not in runtimes:
            yield finding(
                "nvidia.runtime",
                "error",
                "containers declare GPUs but Docker has no nvidia runtime",
                "runtimes.nvidia in /etc/docker/daemon.json",
                ", ".join(runtimes) or "no runtimes",
                "run the converge (nvidia-ctk runtime configure) and restart dockerd",
            )
    if gpu_containers and name == "podman" and not engine.get("cdi_specs"):
        yield finding(
            "nvidia.cdi",
            "error",
            "containers declare GPUs but no NVIDIA CDI spec exists for Podman",
            "/etc/cdi/nvidia.yaml",
            "no CDI spec",
            "run the converge (nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml)",
        )


def _container(
    name: str, declared: Spec, seen: Mapping[str, Any], engine: str
) -> Iterator[Finding]:
    inspect = seen.get("inspect")
    if inspect is None:
        yield finding(
            "container.missing",
            "error",
            f"container {name} does not exist",
            "exists",
            "missing",
            "run the converge to create it",
        )
        return
    state = inspect.get("State") or {}
    if not state.get("Running"):
        yield finding(
            "container.not_running",
            "error",
            f"container {name} is not running",
            "running",
            state.get("Status", "stopped"),
            f"start it ({engine} start {name}) and read its logs for why it stopped",
        )
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
    for diff in diff_container(declared, inspect, engine):
        yield finding(
            f"container.{diff.field}",
            "error",
            f"container {name}: {diff.field} differs from the spec",
            diff.expected,
            diff.actual,
            _CONTAINER_FIXES.get(diff.field, _RECREATE),
        )


def _containers(spec: Spec, probe: Probe) -> Iterator[Finding]:
    seen = {c["name"]: c for c in probe.get("containers") or []}
    engine = spec.get("engine") or "docker"
    for name, declared in (spec.get("containers") or {}).items():
        yield from _container(name, declared, seen.get(name) or {}, engine)


def _gpus(probe: Probe) -> list[Mapping[str, Any]]:
    return (probe.get("gpu") or {}).get("gpus") or []


def _gpu_presence(spec: Spec, probe: Probe) -> Iterator[Finding]:
    wanted = spec.get("gpu", "auto")
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
    xids = gpu.get("xids") or []
    if xids:
        critical = [x for x in xids if x["xid"] in rules()["critical_xids"]]
        codes = ", ".join(sorted({str(x["xid"]) for x in xids}, key=int))
        yield finding(
            "gpu.xid",
            "error" if critical else "warn",
            f"{len(xids)} Xid events since boot"
            + (" (hardware or GPU reset class)" if critical else ""),
            "no Xid events",
            f"Xid {codes}",
            "drain the host and reset or replace the GPU"
            if critical
            else "read the Xid lines in dmesg",
        )
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


def _repo(path: str, declared: Spec, seen: Mapping[str, Any]) -> Iterator[Finding]:
    if not seen.get("head"):
        yield finding(
            "repo.missing",
            "error",
            f"no git checkout at {path}",
            declared["ref"],
            "missing" if not seen.get("exists") else "not a git checkout",
            "run the converge to clone it",
        )
        return
    if seen["head"] != declared["ref"]:
        yield finding(
            "repo.ref",
            "error",
            f"{path} is not at the declared commit",
            declared["ref"],
            seen["head"],
            f"check out {declared['ref']} in {path} (the converge does it when the tree is clean)",
        )
    if seen.get("dirty"):
        yield finding(
            "repo.dirty",
            "warn",
            f"{path} has uncommitted changes: the code running is not the commit",
            "clean working tree",
            seen.get("status") or "modified files",
            f"commit, stash or discard the changes in {path}",
        )
    if declared.get("line_endings", "lf") == "lf" and seen.get("crlf_files"):
        yield finding(
            "repo.crlf",
            "error",
            f"scripts in {path} have CRLF line endings ('bad interpreter', syntax errors)",
            "LF line endings",
            ", ".join(seen["crlf_files"]),
            "convert them (dos2unix, or git add --renormalize with a .gitattributes eol=lf)",
        )
    lockfile = (declared.get("python") or {}).get("lockfile")
    if lockfile and seen.get("lockfile_sha256") != seen.get("lockfile_head_sha256"):
        yield finding(
            "repo.lockfile",
            "error",
            f"{path}/{lockfile} is missing or differs from the committed one",
            seen.get("lockfile_head_sha256") or "the committed lockfile",
            seen.get("lockfile_sha256") or "missing",
            f"restore {lockfile} from the commit (git checkout -- {lockfile}) and re-sync",
        )
    elif lockfile and seen.get("lockfile_installed_sha256") != seen.get("lockfile_sha256"):
        yield finding(
            "repo.lockfile",
            "error",
            f"the environment {seen.get('venv') or ''} was not installed from {path}/{lockfile}",
            f"installed from {lockfile} {seen.get('lockfile_sha256')}",
            f"installed from {seen.get('lockfile_installed_sha256') or 'nothing gpurig recorded'}",
            "run the converge: it re-installs the environment from the lockfile",
        )


def _repos(spec: Spec, probe: Probe) -> Iterator[Finding]:
    seen = {r["path"]: r for r in probe.get("repos") or []}
    for path, declared in (spec.get("repos") or {}).items():
        yield from _repo(path, declared, seen.get(path) or {})


def _cleanup(spec: Spec, probe: Probe) -> Iterator[Finding]:
    cleanup = spec.get("cleanup") or {}
    sessions = (probe.get("ray") or {}).get("sessions") or 0
    if cleanup.get("ray_sessions") and sessions > rules()["ray_sessions_max"]:
        yield finding(
            "cleanup.ray_sessions",
            "warn",
            "old Ray sessions pile up in /tmp/ray",
            f"<= {rules()['ray_sessions_max']} session",
            f"{sessions} sessions",
            "run the converge, or remove old /tmp/ray/session_* directories",
        )
    dirs = [d for d in (probe.get("core_dumps") or {}).get("core_files") or [] if d.get("count")]
    if cleanup.get("core_files") and dirs:
        yield finding(
            "cleanup.core_files",
            "warn",
            "core files are lying around",
            "no core files",
            "; ".join(f"{d['dir']}: {d['count']}" for d in dirs),
            "run the converge, or delete the core files after reading them",
        )


def _toolkit(spec: Spec, probe: Probe) -> Iterator[Finding]:
    version = (spec.get("nvidia_toolkit") or {}).get("version")
    if not version:
        return
    packages = probe.get("packages") or {}
    installed = packages.get("installed") or {}
    names = rules()["toolkit_packages"]
    wrong = {n: (installed.get(n) or {}).get("version") for n in names}
    wrong = {n: v for n, v in wrong.items() if v != version}
    if wrong:
        yield finding(
            "toolkit.version",
            "error",
            "NVIDIA Container Toolkit packages are not at the declared version",
            version,
            ", ".join(f"{n} {v or 'missing'}" for n, v in wrong.items()),
            "run the converge to install the declared toolkit version",
        )
    unheld = [n for n in names if n not in (packages.get("held") or [])]
    if unheld:
        yield finding(
            "toolkit.hold",
            "warn",
            "toolkit packages are not held: an apt upgrade can move them",
            "held",
            f"not held: {', '.join(unheld)}",
            "run the converge (apt-mark hold) so upgrades keep the declared version",
        )


_RULES: tuple[Callable[[Spec, Probe], Iterator[Finding]], ...] = (
    _core_dumps,
    _disks,
    _shm,
    _engine,
    _containers,
    _gpu_presence,
    _compat,
    _gpu_health,
    _repos,
    _cleanup,
    _toolkit,
)


def evaluate(spec: Spec, probe: Probe | None) -> list[Finding]:
    """Every finding for one reachable host; a probe that failed is one `probe.failed`."""
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
