"""Each piece of host state has one reader: no two facts run the same tool invocation or read
the same file.

Every read a full spec needs (drift's: plans, checks and fleet view; onboarding's preflight;
acceptance's), for Docker and for Podman, is run here under strace, each fact's command alone,
in a mount namespace of its own whose /run says systemd runs and a reboot is pending (so the
branches behind those run). Tools gpurig may call on a GPU or engine host (nvidia-smi, docker,
podman, dcgmi, dkms, modinfo, nvidia-container-cli) are stand-ins on PATH so every branch that
calls them runs; the engines' stand-ins answer `container inspect` with a recorded inspect of
a running container whose pid is this test's own, so that process's cgroup is read too. The
declared checkout is a real git repository with a real environment. From each trace:

- a tool invocation is each program the fact's own shell executes that is not text plumbing
  (cat, sed, sha256sum...): its name and arguments, seen through `timeout` and `setpriv`, keyed
  by the state it addresses where the spelling varies: an engine's `inspect` by the container
  it names, whatever its flags; each field of an `nvidia-smi --query-*` on its own, and no
  output-format flag;
- a file read is each file the fact's own shell or its plumbing opens for reading, whether or
  not it exists here (what a tool opens inside itself is that tool's business).

Two reads of one fact (Units for docker and for the fabric manager) are one reader; two fact
classes sharing an invocation or a file fail the test, naming both. A fact reading as the old
probe did (its own `inspect --format`, its own GPU query, the GPU list, the module line, the
CPU quota) shows the test fails when it should.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gpurig.checks.judge import drift_reads
from gpurig.facts.gpurig_acceptance import Acceptance
from gpurig.facts.gpurig_container import ContainerInspect, CpuQuota
from gpurig.facts.gpurig_nvidia import NvidiaGpus
from gpurig.facts.reader import Reader
from gpurig.facts.round_trip import Read, read_key
from gpurig.onboard.onboard import preflight_reads
from gpurig.spec.model import gpu_container, normalise
from tests.unit.test_onboard import new_host

ENGINE_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "engine"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Tools of GPU and engine hosts: stand-ins, so the branches calling them run here.
STAND_INS = ("nvidia-smi", "docker", "podman", "dcgmi", "dkms", "modinfo",
             "nvidia-container-cli", "nvidia-ctk")  # fmt: skip
# The fact's own shell and the text tools it pipes through: what they open is the fact's read.
PLUMBING = {"sh", "dash", "cat", "sed", "head", "tail", "grep", "cut", "tr", "wc", "sort",
            "uniq", "sha256sum", "printf", "echo", "true", "false", "basename",
            "dirname"}  # fmt: skip
# Programs that run another as given (`timeout 20 nvidia-smi -L`, `setpriv ... python`).
WRAPPERS = {"timeout", "setpriv", "env", "nice"}
# Opens by the loader, libc and the locale, and the framing's nonce (facts/round_trip.py
# START, each Sectioned fact's own): not host state.
NOISE = re.compile(r"^(/etc/ld\.so\.|/lib|/usr/lib|/usr/share/locale|/dev/null$|/dev/tty$|"
                   r"/proc/self/|/proc/filesystems$|/etc/nsswitch\.conf$|/etc/passwd$|"
                   r"/etc/group$|/proc/sys/kernel/random/uuid$)")  # fmt: skip
# This login's own identity (`id -u`), asked by the login fact and by the import check to know
# whether it runs as root: the reading process's, not the host's state. And who may change a
# path (facts/safe_path.sh: `stat -c '%u %a %F'` of each component from /, `readlink` of a
# link on the way), asked by the
# checkout's read (the converge's repo.writable) and by the import check, which acts on its
# answer in the same shell (whom it runs the environment's python as), so it cannot take
# another fact's.
SHARED = {("id", "-u")}
PERMISSION_CHECKS = (("readlink", "--"), ("stat", "-c", "%u %a %F", "--"))

_NOT_A_READ = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND", "O_DIRECTORY")
_STRING = r'"((?:[^"\\]|\\.)*)"'


def _unescape(text: str) -> str:
    return text.encode("latin-1", "backslashreplace").decode("unicode_escape")


def stand_ins(directory: Path) -> str:
    """A PATH with the stand-ins first: each prints nothing, but the engines answer `container
    inspect` with their recorded inspect of a running container whose pid is this process's."""
    directory.mkdir()
    for tool in STAND_INS:
        script = "#!/bin/sh\nexit 0\n"
        if tool in ("docker", "podman"):
            recorded = (ENGINE_FIXTURES / f"{tool}-inspect-train.json").read_text()
            inspect = directory / f"{tool}-inspect.json"
            inspect.write_text(re.sub(r'"Pid": \d+,', f'"Pid": {os.getpid()},', recorded))
            script = f'#!/bin/sh\n[ "$1 $2" = "container inspect" ] && cat {inspect}\nexit 0\n'
        (directory / tool).write_text(script)
        (directory / tool).chmod(0o755)
    return f"{directory}:{SYSTEM_PATH}"


# A /run of the traced command's own: systemd runs, a reboot is pending.
_RUN = "mount -t tmpfs gpurig-test /run && mkdir -p /run/systemd/system && : > /run/reboot-required"


def trace(command: str, path: str, out: Path) -> list[Path]:
    """Run `command` with sh under strace in a mount namespace of its own, one log per
    process; the logs."""
    out.mkdir()
    calls = "trace=execve,open,openat,clone,clone3,fork,vfork"
    strace = ["strace", "-ff", "-qq", "-v", "-s", "65536", "-o", str(out / "log"), "-e", calls,
              "sh", "-c", command]  # fmt: skip
    subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         f"{_RUN} && exec {shlex.join(strace)}"],
        env={"PATH": path, "LC_ALL": "C", "HOME": "/root"}, stdin=subprocess.DEVNULL,
        capture_output=True, timeout=300, check=True,
    )  # fmt: skip
    return sorted(out.glob("log.*"))


def _argv(text: str) -> list[str]:
    """strace's `["a", "b"]` (from its start) as a list, whatever the strings hold."""
    argv, at = [], 1
    while text[at] != "]":
        match = re.compile(_STRING).match(text, at)
        assert match is not None, text[at : at + 80]
        argv.append(_unescape(match[1]))
        at = match.end() + (2 if text[match.end()] == "," else 0)
    return argv


def _events(log: Path) -> Iterable[tuple[str, Any]]:
    for line in log.read_text(encoding="latin-1").splitlines():
        if match := re.match(rf"execve\({_STRING}, ", line):
            if line.rstrip().endswith("= 0"):
                argv = _argv(line[match.end() :])
                yield "exec", (os.path.basename(_unescape(match[1])), argv)
        elif match := re.match(rf"open(?:at)?\((?:AT_FDCWD, )?{_STRING}, ([A-Z_|]+)", line):
            if not any(flag in match[2] for flag in _NOT_A_READ):
                yield "open", _unescape(match[1])
        elif match := re.match(r"(?:clone3?|v?fork)\(.*\)\s+= (\d+)$", line):
            yield "child", int(match[1])


def invocation(program: str, args: list[str]) -> list[tuple[str, ...]]:
    """The keys of one tool invocation: the state it addresses, not how it is spelled."""
    if program in ("docker", "podman") and "inspect" in args and "exec" not in args:
        return [("exec", program, "inspect", args[-1])]  # the container's state, by its name
    if program == "nvidia-smi":
        keys: list[tuple[str, ...]] = []
        rest = []
        for arg in args:
            query = re.fullmatch(r"(--query-[a-z-]+)=(.*)", arg)
            if query:
                keys += [("exec", program, query[1], field) for field in query[2].split(",")]
            elif arg != "-x" and not arg.startswith("--format="):
                rest.append(arg)
        return keys or [("exec", program, *rest)]
    return [("exec", program, *args)]


def readings(logs: list[Path]) -> set[tuple[str, ...]]:
    """What one traced command read: ("exec", program, args...) and ("file", path) keys."""
    events = {int(log.name.split(".")[-1]): list(_events(log)) for log in logs}
    children = {child for evs in events.values() for kind, child in evs if kind == "child"}
    [root] = [pid for pid in events if pid not in children]
    found: set[tuple[str, ...]] = set()
    # (pid, does the fact's own shell still run in it) from the root down, in creation order.
    todo = [(root, True)]
    while todo:
        pid, own = todo.pop()
        for kind, value in events.get(pid, []):
            if kind == "child":
                todo.append((value, own))
            elif kind == "exec" and own:
                program, argv = value
                if program in PLUMBING or program in WRAPPERS:
                    continue
                found.update(invocation(program, argv[1:]))
                own = False
            elif kind == "open" and own and value.startswith("/") and not NOISE.match(value):
                found.add(("file", os.path.normpath(value)))
    return found


def readers(reads: list[Read], tmp_path: Path) -> dict[tuple[str, ...], set[str]]:
    """{invocation or file: the fact classes that read it} over `reads`, each traced alone."""
    path = stand_ins(tmp_path / "bin")

    def one(index: int) -> tuple[str, set[tuple[str, ...]]]:
        cls, kwargs = reads[index]
        logs = trace(cls().command(**kwargs), path, tmp_path / f"trace-{index}")
        return cls.__name__, readings(logs)

    found: dict[tuple[str, ...], set[str]] = defaultdict(set)
    with ThreadPoolExecutor(max_workers=4) as pool:
        for name, keys in pool.map(one, range(len(reads))):
            for key in keys:
                found[key].add(name)
    return found


def full_spec(engine: str, checkout: Path, secret: Path) -> dict[str, Any]:
    """Every concern declared; the checkout a real git repository with a real environment."""
    return {
        "engine": engine,
        **({"podman_socket": True} if engine == "podman" else {}),
        "gpu": "auto",
        "core_dumps": "disabled",
        "insecure_registries": ["registry.example:5000"],
        "nvidia_toolkit": {"version": "1.17.8-1"},
        "driver": {"version": "580.95.05"},
        "compose": {"version": "2.29.7", "sha256": "a" * 64},
        "packages": ["tmux"],
        "containers": {"train": {"image": "r/x@sha256:" + "a" * 64, "gpus": "all",
                                 "shm_size": "1g", "omp_num_threads": "auto"}},
        "repos": {str(checkout): {"url": "https://example.org/c.git", "ref": "b" * 40,
                                  "python": {"lockfile": "uv.lock", "venv": str(checkout / ".venv"),
                                             "imports": ["yaml"]}}},
        "secrets": [{"src": str(secret), "dest": str(secret.with_name("netrc-deployed"))}],
        "cleanup": {"ray_sessions": True, "core_files": True, "editable_finders": True,
                    "flashinfer_cache": True},
        "checks": {"disk_free_min": "1g", "inodes_free_min_pct": 1},
    }  # fmt: skip


def every_read(private_dir: Path) -> list[Read]:
    """Drift's, onboarding's and acceptance's reads of a full spec, Docker and Podman."""
    checkout = private_dir / "code"
    checkout.mkdir()
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    (checkout / ".venv" / "bin").mkdir(parents=True)
    (checkout / ".venv" / "bin" / "python").symlink_to(sys.executable)
    secret = private_dir / "netrc"
    secret.write_text("machine example.org\n")
    secret.with_name("netrc-deployed").write_text("machine example.org\n")
    reads: dict[str, Read] = {}
    for engine in ("docker", "podman"):
        raw = full_spec(engine, checkout, secret)
        engine_name, container = gpu_container(normalise(raw))
        accept = [
            (NvidiaGpus, {}),
            (
                Acceptance,
                {"engine": engine_name, "container": container, "gpus": 2, "nccl_bytes": 1024},
            ),
        ]
        for cls, kwargs in [*drift_reads(normalise(raw)), *preflight_reads(new_host(raw)), *accept]:
            reads.setdefault(read_key(cls, kwargs), (cls, kwargs))
    return list(reads.values())


def shared(found: dict[tuple[str, ...], set[str]]) -> dict[tuple[str, ...], set[str]]:
    def asked_by_both(call: tuple[str, ...]) -> bool:
        return call in SHARED or any(call[: len(p)] == p for p in PERMISSION_CHECKS)

    return {key: names for key, names in found.items()
            if len(names) > 1 and not asked_by_both(key[1:])}  # fmt: skip


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, ...], set[str]]:
    if os.geteuid() != 0:
        pytest.fail("tracing every fact as a host runs it needs root (a mount namespace, /proc)")
    memory = re.search(r"^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(.*)$|^0::(.*)$",
                       Path("/proc/self/cgroup").read_text(), re.M)  # fmt: skip
    if memory is None or (memory[1] or memory[2]) == "/":
        pytest.fail("the stand-in container's pid (this test's) must not be in the root memory "
                    "cgroup, which CgroupMemory reads as the login's own")  # fmt: skip
    top = Path(tempfile.mkdtemp(prefix="gpurig-test-", dir="/srv"))
    top.chmod(0o755)
    try:
        return readers(every_read(top), tmp_path_factory.mktemp("one-reader"))
    finally:
        subprocess.run(["rm", "-rf", "--", str(top)], check=True)


def test_no_two_facts_read_the_same_invocation_or_file(traced: dict) -> None:
    assert shared(traced) == {}


def test_the_trace_sees_each_piece_of_state_at_its_one_reader(traced: dict) -> None:
    """The trace is meaningful: the reads this issue was about are seen, at their reader."""
    expected = {
        ("exec", "nvidia-smi", "-L"): {"NvidiaGpus"},
        ("exec", "nvidia-smi", "--version"): {"NvidiaGpus"},
        ("file", "/proc/driver/nvidia/version"): {"NvidiaGpus"},
        ("exec", "nvidia-smi", "--query-gpu", "driver_version"): {"NvidiaGpus"},
        ("exec", "nvidia-smi", "-q"): {"GpuHealth"},
        ("exec", "nvidia-container-cli", "info"): {"NvidiaGpus"},
        ("exec", "docker", "inspect", "train"): {"ContainerInspect"},
        ("exec", "podman", "inspect", "train"): {"ContainerInspect"},
        ("file", f"/proc/{os.getpid()}/cgroup"): {"ContainerInspect"},
        ("exec", "systemctl", "is-active", "nvidia-fabricmanager"): {"Units"},
        ("file", "/etc/os-release"): {"OsRelease"},
        ("file", "/proc/cgroups"): {"CgroupLeaks"},
    }
    assert {key: traced.get(key) for key in expected} == expected
    # Disk headroom: one df of each kind, for `/` and the spec's other paths together.
    df = [key for key in traced if key[:5] == ("exec", "df", "-P", "-k", "--")]
    assert len(df) == 1 and "/" in df[0][5:] and traced[df[0]] == {"DiskSpace"}
    quota = [k for k in traced if k[0] == "file" and re.search(r"cpu\.max|cfs_quota_us$", k[1])]
    assert quota and all(traced[k] == {"CpuQuota"} for k in quota)


class OldProbe(Reader):
    """The probe's reads this issue found doubled, as it spelled them: the container's state by
    `inspect --format`, GPU fields by its own query, the GPU list, the driver's module line and
    the CPU quota (v2 and v1)."""

    def command(self) -> str:
        return (
            "timeout 20 docker inspect --type container --format "
            "'{{.State.Running}} {{.State.Pid}}' -- train\n"
            "timeout 20 nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader\n"
            "timeout 20 nvidia-smi -L\ncat /proc/driver/nvidia/version\n"
            "cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpu/cpu.cfs_quota_us\ntrue"
        )


def test_the_old_probes_second_reads_fail_the_test(tmp_path: Path) -> None:
    inspect = (ContainerInspect, {"engine": "docker", "container": "train"})
    reads = [(NvidiaGpus, {}), (CpuQuota, {}), inspect, (OldProbe, {})]
    doubled = shared(readers(reads, tmp_path))
    gpu = {"NvidiaGpus", "OldProbe"}
    assert {key: names for key, names in doubled.items() if key[0] == "exec"} == {
        ("exec", "docker", "inspect", "train"): {"ContainerInspect", "OldProbe"},
        ("exec", "nvidia-smi", "--query-gpu", "index"): gpu,
        ("exec", "nvidia-smi", "--query-gpu", "name"): gpu,
        ("exec", "nvidia-smi", "--query-gpu", "driver_version"): gpu,
        ("exec", "nvidia-smi", "-L"): gpu,
    }
    assert doubled[("file", "/proc/driver/nvidia/version")] == gpu
    quota = {key for key in doubled if key[0] == "file" and "cpu" in key[1]}
    assert quota and all(doubled[key] == {"CpuQuota", "OldProbe"} for key in quota)
