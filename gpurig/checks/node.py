"""The host and node: reaching and reading it (login, host key, sudo, root), headroom (disk,
inodes, memory for the declared /dev/shm), login shells, OOM kills at the cgroup root, cgroup
leaks, per-cpu memory, shadowed imports. Things the converge cannot change.

Pure rules `rule(spec, read) -> [Finding]` over the node facts (facts/gpurig_node.py, the
environments' import reports), read through the checks' reader (gpurig.checks.all), plus the
findings drift and onboarding build before or instead of a read (unreachable, key changed,
sudo asks for a password, unreadable output, a bug in gpurig). Ids, severities, remediations,
sources and thresholds: gpurig/data/checks.yaml (cgroup OOM kills on rented pods, a Kubernetes
node health baseline).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from gpurig.checks.rules import ByInput, found, rules
from gpurig.facts.gpurig_node import (
    CgroupLeaks,
    CgroupMemory,
    DiskSpace,
    HostMemory,
    Login,
    LoginShell,
)
from gpurig.facts.gpurig_repo import EnvImports
from gpurig.spec.finding import Finding, Severity
from gpurig.spec.hostkeys import changed_message, refused_jump
from gpurig.spec.units import format_size, parse_size
from gpurig.spec.user_scope import is_user

Read = Callable[..., Any]
Spec = Mapping[str, Any]
_GB = 1000**3

IDS = (
    "host.unreachable", "host.key_changed", "host.sudo_password", "host.not_root",
    "state.unreadable", "gpurig.internal_error", "core_dumps.login_shell",
    "disk.free", "disk.inodes", "shm.size", "host.oom_kill", "host.cgroup_leak",
    "host.percpu_memory", "env.imports", "env.imports_unchecked",
)  # fmt: skip
HOST = "host"  # the subject of what concerns the whole host or the login
OOM_FIX = "raise the memory limit or lower what each process holds (num_workers x in-RAM data)"


def unreachable(error: str) -> Finding:
    """The finding for a host that could not be reached; `evaluate` never sees such a host."""
    return found(
        "host.unreachable",
        HOST,
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
    return found(
        "host.sudo_password",
        HOST,
        sudo_refused_message(name),
        "root, passwordless sudo, or `scope: user`",
        "sudo: a password is required",
        "log in as root, give the login passwordless sudo, or declare `scope: user` in its spec",
    )


def key_changed(name: str, inventory: str, error: str) -> Finding:
    """The finding for a host whose host key, or whose login node's (the error says which
    hop), is not the recorded one: never connect to it."""
    jump = refused_jump(error)
    if jump:
        return found(
            "host.key_changed",
            HOST,
            changed_message(name, inventory, jump),
            f"the login node's ssh.jump.host_key recorded in {inventory}",
            error,
            "check the login node's fingerprint with the cluster's admins; if it was "
            "re-installed, record its new key in ssh.jump.host_key",
        )
    return found(
        "host.key_changed",
        HOST,
        changed_message(name, inventory),
        f"the host key recorded in {inventory}",
        error,
        "check with the provider; if the machine was re-created, remove its host_key and run "
        "`gpurig onboard` again",
    )


def unreadable(what: str, exc: Exception) -> Finding:
    """One concern whose output its parser refused: that concern, not the host, is unjudged."""
    return found(
        "state.unreadable",
        what,
        f"{what}: the host's output could not be read",
        "output gpurig can parse",
        str(exc)[:300],
        "run the converge with -v to see the host's output, or inspect the host by hand",
    )


def internal_error(exc: Exception) -> Finding:
    """A bug in gpurig met while judging a host: said as ours, never as the host's output."""
    return found(
        "gpurig.internal_error",
        HOST,
        "gpurig failed while judging this host (a bug in gpurig, not in the host)",
        "a report",
        f"{type(exc).__name__}: {exc}"[:300],
        "the other hosts' reports are complete",
    )


def _not_root(spec: Spec, read: Read) -> Iterator[Finding]:
    """A read by a login that is neither root nor able to sudo without a password: what
    `drift --local` warns about and onboarding's preflight refuses (scope: user means it, and
    never asks sudo)."""
    if is_user(spec):
        return
    host = read(Login)
    if host["uid"] in (0, None) or host["sudo"]:
        return
    user = host["user"] or f"uid {host['uid']}"
    why = "no sudo installed" if host["sudo"] is None else "`sudo -n true` is refused"
    yield found(
        "host.not_root",
        HOST,
        f"{user} is not root and has no passwordless sudo ({why}): files only root may read, "
        "an engine socket it may not use and a restricted kernel log read as missing or changed",
        "root, or passwordless sudo",
        f"{user} without passwordless sudo",
        f"give {user} passwordless sudo, or log in as root (a SLURM prolog or epilog runs as root)",
    )


def core_dumps(spec: Spec, read: Read) -> Iterator[Finding]:
    """A login shell that ends with a core limit other than 0 while core dumps are disabled:
    where the login's trace shows the `ulimit` that set it, the finding names its file and
    line (LoginShell's `where`), else where to look."""
    if spec["core_dumps"] != "disabled":
        return
    shell = read(LoginShell)
    login = shell["ulimit_c"]
    if login in ("0", None):
        return
    ours = "gpurig's block" if is_user(spec) else "/etc/profile.d/gpurig-core.sh"
    message = "a login shell may still write core files, which can fill the disk"
    fix = f"find what raises the limit after {ours} (~/.bashrc, /etc/bash.bashrc) and remove it"
    where = shell.get("where")
    if where:
        at = f"{where['file']}:{where['line']}"
        message = f"{at} `{where['command']}` raises the limit after {ours}: {message}"
        fix = (
            f"remove `{where['command']}` at {at} (or declare core_dumps: enabled where core "
            "files are wanted)"
        )
    yield found(
        "core_dumps.login_shell",
        "login shells",
        message,
        "ulimit -c 0",
        f"ulimit -c {login}",
        fix,
    )


def _size(size: int | None) -> str:
    return "unknown" if size is None else format_size(size)


def disk_paths(spec: Spec) -> list[str]:
    """Where headroom is judged: the root, /tmp and every declared checkout."""
    return ["/", "/tmp", *spec["repos"]]


def _why(path: str) -> str:
    """A judged path, with why its filesystem's headroom matters."""
    if path == "/":
        return "/ (the root filesystem: packages, engine images, logs)"
    if path == "/tmp":
        return "/tmp (temporary files: uploads and builds are staged there)"
    return f"{path} (a declared checkout and its environment)"


def _disks(spec: Spec, read: Read) -> Iterator[Finding]:
    checks = spec.get("checks") or {}
    free_min = parse_size(checks["disk_free_min"]) if "disk_free_min" in checks else None
    inode_pct = checks.get("inodes_free_min_pct")
    if free_min is None and inode_pct is None:
        return
    disks = [d for d in read(DiskSpace, paths=disk_paths(spec)) if d.get("exists")]
    held: dict[str, list[str]] = {}  # mount -> the judged paths it holds
    for disk in disks:
        held.setdefault(disk.get("mount") or disk["path"], []).append(disk["path"])
    seen: set[str] = set()
    for disk in disks:
        mount = disk.get("mount") or disk["path"]
        if mount in seen:
            continue
        seen.add(mount)
        holds = f"; it holds {', '.join(_why(path) for path in held[mount])}"
        free = disk.get("free_bytes")
        if free_min is not None and free is not None and free < free_min:
            yield found(
                "disk.free",
                f"filesystem {mount}",
                f"{mount} has {_size(free)} free, below the declared minimum{holds}",
                f">= {format_size(free_min)}",
                _size(free),
                f"free space on {mount}: old checkpoints, core files, caches, docker images",
            )
        total, ifree = disk.get("inodes_total"), disk.get("inodes_free")
        if (
            inode_pct is not None
            and total
            and ifree is not None
            and ifree * 100 < inode_pct * total
        ):
            yield found(
                "disk.inodes",
                f"filesystem {mount}",
                f"{mount} is running out of inodes (many small files){holds}",
                f">= {inode_pct}% free",
                f"{ifree * 100 / total:.1f}% free",
                f"remove small-file caches on {mount} (pip/uv caches, __pycache__, ray logs)",
            )


def _shm(spec: Spec, read: Read) -> Iterator[Finding]:
    """A container's own /dev/shm (`--shm-size`: a tmpfs per container) larger than the host's
    memory: filling it takes the host down, since tmpfs pages cannot be reclaimed."""
    if not any("shm_size" in c for c in (spec.get("containers") or {}).values()):
        return
    memory = read(HostMemory)["total_bytes"]
    if not memory:
        return
    for name, container in (spec.get("containers") or {}).items():
        size = parse_size(container["shm_size"]) if "shm_size" in container else None
        if size is not None and size > memory:
            yield found(
                "shm.size",
                f"container {name}",
                f"container {name}'s /dev/shm may grow past the host's memory: a full tmpfs "
                "that large cannot be swapped out or freed and takes the host down",
                f"<= {format_size(memory)} (the host's memory)",
                format_size(size),
                f"lower containers.{name}.shm_size to what the job needs, below the host's memory",
            )


def _level(value: int, limits: Mapping[str, int | float], scale: int = 1) -> Severity | None:
    """'error' or 'warn' for a reading above the table's limits, None below both."""
    if value > limits["error"] * scale:
        return "error"
    return "warn" if value > limits["warn"] * scale else None


def _oom(_spec: Spec, read: Read) -> Iterator[Finding]:
    kills = read(CgroupMemory)["oom_kill"]
    if kills:
        yield found(
            "host.oom_kill",
            HOST,
            "the kernel OOM-killed processes in the cgroup this login sees as its root "
            "(a rented pod's own memory limit, or the whole host)",
            "oom_kill 0",
            f"oom_kill {kills}",
            OOM_FIX,
        )


def level_by_input(check_id: str, limits: str, unit: str) -> list[ByInput]:
    """A thresholded id's severity per reading, as _level judges it (checks.yaml thresholds)."""
    bound, remedy = rules()["thresholds"][limits], rules()["checks"][check_id]["remediation"]
    return [
        ByInput("error", remedy, f"more than {bound['error']} {unit}"),
        ByInput("warn", remedy, f"more than {bound['warn']} {unit}, up to {bound['error']}"),
    ]


def _leaks(_spec: Spec, read: Read) -> Iterator[Finding]:
    cgroup = read(CgroupLeaks)
    thresholds = rules()["thresholds"]
    counted = cgroup["count"]
    level = counted and _level(counted["count"], thresholds["cgroups"])
    if counted and level:
        dying = f", {counted['dying']} of them dying" if counted["dying"] is not None else ""
        yield found(
            "host.cgroup_leak",
            HOST,
            "the host holds too many cgroups: a leak slows every container start",
            f"<= {thresholds['cgroups']['warn']} cgroups",
            f"{counted['count']} cgroups{dying} ({counted['source']})",
            "find what creates cgroups without removing them (crash-looping pods or units)",
            severity=level,
        )
    # The root memory.stat's count (cgroup v2), else /proc/meminfo's.
    percpu = cgroup["percpu"]
    if percpu["bytes"] is None:
        percpu = read(HostMemory)["percpu"]
    size = percpu["bytes"]
    level = size is not None and _level(size, thresholds["percpu_gb"], _GB)
    if size is not None and level:
        yield found(
            "host.percpu_memory",
            HOST,
            "per-cpu kernel memory is large: memory cgroups are leaking (dying memcgs)",
            f"<= {thresholds['percpu_gb']['warn']} GB",
            f"{size / _GB:.1f} GB ({percpu['source']})",
            "look for deleted cgroups still charged (cgroup.stat nr_dying_descendants)",
            severity=level,
        )


def _inside(path: str, directories: Sequence[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in directories)


def _where(module: Mapping[str, Any] | None, report: Mapping[str, Any]) -> str | None:
    """Why a module does not count as the environment's own, or None when it does."""
    if module is None:
        return "not found"
    if "error" in module:
        return f"find_spec failed: {module['error']}"
    origin, locations = module["origin"], module["locations"]
    places = report["site"] + report["stdlib"]
    if origin is not None:
        path = os.path.dirname(origin) if os.path.basename(origin) == "__init__.py" else origin
        return None if _inside(path, places) else f"from {path}"
    if not locations:
        return None  # built in or frozen: part of the interpreter
    outside = [p for p in locations if not _inside(p, places)]
    return f"a directory without __init__.py: {', '.join(outside)}" if outside else None


def import_reads(spec: Spec, read: Read) -> dict[str, Any]:
    """{checkout: its environment's import report} for each repo declaring `python.imports`."""
    return {
        path: read(EnvImports, checkout=path, venv=repo["python"]["venv"],
                   modules=list(repo["python"]["imports"]))
        for path, repo in spec["repos"].items()
        if (repo.get("python") or {}).get("imports")
    }  # fmt: skip


def env_imports(spec: Spec, read: Read) -> Iterator[Finding]:
    for path, entry in import_reads(spec, read).items():
        repo = spec["repos"][path]
        wanted = repo["python"]["imports"]
        if entry["refused"]:
            yield found(
                "env.imports_unchecked",
                f"environment {repo['python']['venv']}",
                f"the imports of {path} were not checked: gpurig runs an environment's python "
                "only as the one account that can change it",
                "the checkout and its environment changeable by one account",
                entry["refused"],
                f"{path} and {repo['python']['venv']}, and the directories above them",
            )
            continue
        if entry["report"] is None and entry["error"] is None:
            continue  # no environment to ask: repo.env reports it missing
        fix = (
            f"add the package to {repo['python']['lockfile']} (or rename the directory that "
            f"shadows it in {path})"
        )
        if entry["error"]:
            actual = f"{entry['python']}: {entry['error']}"
            bad = {name: "not checked" for name in wanted}
        else:
            report = entry["report"]
            where = {
                name: _where(report["modules"][name], report)
                if name in report["modules"]
                else "not reported by the environment's python"
                for name in wanted
            }
            bad = {name: why for name, why in where.items() if why}
            actual = "; ".join(f"{name}: {why}" for name, why in bad.items())
        if bad:
            yield found(
                "env.imports",
                f"environment {repo['python']['venv']}",
                f"{', '.join(bad)} do not import from the environment of {path}",
                f"each of {', '.join(wanted)} from the environment's site-packages",
                actual,
                fix,
            )


RULES = (_not_root, core_dumps, _disks, _shm, _oom, _leaks)
# Environments' imports: a node contract's mode may leave them out for time (gpurig.checks.all).
IMPORTS = (env_imports,)
