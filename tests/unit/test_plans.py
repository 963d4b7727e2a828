"""The plans on a converged host: nothing to change; then one hand-made difference at a time,
for every change id the plans can emit, on a Docker and a Podman host. The same plans drive
the converge and the drift report, so this table is both."""

from __future__ import annotations

import copy
import hashlib
import hmac
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpurig.checks import container as container_checks
from gpurig.checks.rules import one_per_cause
from gpurig.facts.gpurig_cleanup import CoreFiles, EditableFinders, FlashinferCache, RaySessions
from gpurig.facts.gpurig_container import ContainerInspect, CpuQuota, UserContainerInspect
from gpurig.facts.gpurig_files import MODP_2048, FileDigests, SecretDigests
from gpurig.facts.gpurig_json import JsonFile
from gpurig.facts.gpurig_nvidia import NvidiaGpus
from gpurig.facts.gpurig_packages import DebProviders, DebStatus, DriverPackages, OsRelease
from gpurig.facts.gpurig_repo import LF_ATTRIBUTES, RepoState
from gpurig.facts.gpurig_toolkit import CdiSpec, ToolkitKeyring
from gpurig.facts.gpurig_units import Units
from gpurig.facts.gpurig_user import (
    Commands,
    LoginProfile,
    UserCoreFiles,
    UserPodman,
    UserRaySessions,
)
from gpurig.plans import CHANGE_IDS, compose, core_dumps, driver, engine, plan_host, toolkit
from gpurig.plans.change import findings
from gpurig.plans.secrets import local_digest, public, shared_key
from gpurig.spec.container import FIELD_NAMES
from gpurig.spec.model import normalise
from gpurig.spec.user_scope import REGISTRIES

PLANS_DIR = Path(__file__).resolve().parents[2] / "gpurig" / "plans"
DIGEST = "sha256:" + "a" * 64
REF = "b" * 40
LOCK = "1" * 64
SECRET = str(Path(__file__).resolve().parent / "operations" / "netrc.sample")
# The host's side of the secrets' key exchange (facts.gpurig_files.SecretDigests), fixed here.
HOST_PRIVATE = 0x5EC12E7
HOST_PUBLIC = format(pow(2, HOST_PRIVATE, MODP_2048), "x")


def host_digest(path: str) -> str:
    """What the host prints for a file: HMAC-SHA256 under the key it shares with this run."""
    key = pow(int(public(), 16), HOST_PRIVATE, MODP_2048).to_bytes(256, "big")
    return hmac.new(key, Path(path).read_bytes(), hashlib.sha256).hexdigest()


VERSION = "1.17.8-1"
DRIVER = "590.48.01"
COMPOSE_SHA = "d" * 64
HOME_NETRC = "/home/alice/.netrc"
TOKEN_URL = "https://u:ghp_Zq8vN3kT5wR2yL7mP4xC9bH6jD1sF0gA2eUi@example.org/code.git"


def spec_for(kind: str) -> dict[str, Any]:
    if kind == "user":
        return user_spec()
    return normalise(
        {
            "engine": kind,
            "podman_socket": kind == "podman",
            "gpu": "auto",
            "insecure_registries": ["10.0.0.5:5000"],
            "nvidia_toolkit": {"version": VERSION},
            "packages": ["tmux"],
            "driver": {"version": DRIVER},
            "compose": {"version": "2.29.7", "sha256": COMPOSE_SHA},
            "containers": {
                "train": {
                    "image": f"registry.example/train@{DIGEST}", "shm_size": "1g", "user": "root",
                    "gpus": "all", "network": "host", "mounts": ["/data:/data:ro"],
                    "env": {"HF_TOKEN": "hf_secret"}, "ulimits": {"nofile": "1024:4096"},
                    "command": ["sleep", "infinity"],
                }
            },
            "repos": {"/srv/code": {"url": "https://x/code.git", "ref": REF,
                                    "python": {"lockfile": "uv.lock", "keep": ["torch"]}}},
            "secrets": [{"src": SECRET, "dest": "/root/.netrc"}],
            "cleanup": {"ray_sessions": True, "core_files": True, "editable_finders": True,
                        "flashinfer_cache": True},
        }
    )  # fmt: skip


def user_spec() -> dict[str, Any]:
    """A cluster user's spec (scope: user): everything but what needs root."""
    spec = spec_for("podman")
    for key in ("packages", "nvidia_toolkit", "compose"):
        del spec[key]
    return normalise(
        {**spec, "scope": "user", "driver": {"version": DRIVER},
         "secrets": [{"src": SECRET, "dest": HOME_NETRC}]}
    )  # fmt: skip


def inspect_for(kind: str) -> dict[str, Any]:
    gpus = (
        {"DeviceRequests": [{"Count": -1, "Capabilities": [["gpu"]]}]}
        if kind == "docker"
        else {"Devices": [{"PathOnHost": "nvidia.com/gpu=all"}]}
    )
    return {
        "State": {"Running": True, "Status": "running"},
        "Config": {"Image": f"registry.example/train@{DIGEST}", "User": "root",
                   "Env": ["PYTHONUNBUFFERED=1", "HF_TOKEN=hf_secret"],
                   "Cmd": ["sleep", "infinity"]},
        "HostConfig": {"ShmSize": 1024**3, "NetworkMode": "host", **gpus,
                       "Ulimits": [{"Name": "core", "Soft": 0, "Hard": 0},
                                   {"Name": "nofile", "Soft": 1024, "Hard": 4096}],
                       "RestartPolicy": {"Name": "on-failure", "MaximumRetryCount": 5}},
        "Mounts": [{"Type": "bind", "Source": "/data", "Destination": "/data", "RW": False}],
    }  # fmt: skip


# What a converged host holds in each file the plans manage, written out here and not taken
# from the plans (whose output would otherwise agree with itself): as limits.conf(5),
# systemd-system.conf(5), NVIDIA's container toolkit install guide (the apt source line),
# apt_preferences(5), unattended-upgrades' Package-Blacklist and containers-registries.conf(5)
# spell them. A plan that starts writing something else finds drift here.
NO_CORES = "# Managed by gpurig: no core dumps.\n"
REGISTRY = '# Managed by gpurig.\n[[registry]]\nlocation = "10.0.0.5:5000"\ninsecure = true\n\n'
SYSTEM_FILES = {
    "/etc/security/limits.d/90-gpurig-core.conf": f"{NO_CORES}*    -    core    0\n"
    "root -    core    0\n",
    "/etc/profile.d/gpurig-core.sh": f"{NO_CORES}ulimit -S -c 0 2>/dev/null || true\n",
    "/etc/systemd/system.conf.d/90-gpurig-core.conf": f"{NO_CORES}[Manager]\nDefaultLimitCORE=0\n",
    "/etc/apt/sources.list.d/nvidia-container-toolkit.list": "# Managed by gpurig.\n"
    "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
    "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /\n",
    "/etc/apt/preferences.d/nvidia-container-toolkit": "# Managed by gpurig: the NVIDIA container "
    "toolkit at one version.\nPackage: nvidia-container-toolkit nvidia-container-toolkit-base "
    f"libnvidia-container-tools libnvidia-container1\nPin: version {VERSION}\n"
    "Pin-Priority: 1001\n",
    "/etc/apt/apt.conf.d/99gpurig-nvidia-driver": "// Managed by gpurig: unattended-upgrades "
    "leaves the NVIDIA driver alone (each entry\n// is a regular expression matched at the start "
    'of a package name).\nUnattended-Upgrade::Package-Blacklist {\n    "nvidia-";\n'
    '    "libnvidia-";\n    "libcuda1$";\n    "libnvcuvid1$";\n    "cuda-drivers";\n'
    '    "xserver-xorg-video-nvidia";\n    "firmware-nvidia-gsp";\n};\n',
}
PODMAN_FILES = {
    "/etc/containers/registries.conf.d/90-gpurig.conf": REGISTRY,
    "/etc/profile.d/gpurig-docker-host.sh": "# Managed by gpurig: docker CLI and SDK use Podman."
    "\nexport DOCKER_HOST=unix:///run/podman/podman.sock\n",
    "/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json": None,  # CDI instead
}
USER_FILES = {"~/.config/containers/registries.conf.d/90-gpurig.conf": REGISTRY}
# gpurig's blocks in a user's login file, as a converged host's ~/.profile holds them.
PROFILE_BLOCKS = {
    "core_dumps": ["ulimit -S -c 0 2>/dev/null || true"],
    "docker_host": [
        'DOCKER_HOST="unix://$(if [ -e "/var/lib/systemd/linger/$(id -un)" ]; then echo '
        '"/run/user/$(id -u)"; else echo "/tmp/podman-run-$(id -u)"; fi)/podman/podman.sock"',
        'CONTAINER_HOST="$DOCKER_HOST"',
        "export DOCKER_HOST CONTAINER_HOST",
    ],
}


def wanted_files(kind: str) -> dict[str, str | None]:
    """Every file the plans manage, with the content a converged host has (None: absent)."""
    if kind == "user":
        return USER_FILES
    return {**SYSTEM_FILES, **(PODMAN_FILES if kind == "podman" else {})}


def converged(kind: str) -> dict[str, Any]:
    """A converged host's state, per fact class (mutations edit it)."""
    spec = spec_for(kind)
    files = {
        path: {"sha256": hashlib.sha256(c.encode()).hexdigest(), "mode": "644", "owner": "root"}
        for path, c in wanted_files(kind).items()
        if c is not None
    }
    dest = spec["secrets"][0]["dest"]
    files[dest] = {"sha256": host_digest(SECRET), "mode": "600", "owner": "root"}
    files[compose.PLUGIN] = {"sha256": COMPOSE_SHA, "mode": "755", "owner": "root"}
    return {
        "spec": spec,
        "files": files,
        "packages": {
            **{p: {"version": "1", "held": False}
               for p in ("tmux", "git", "docker.io", "podman", "ca-certificates", "curl",
                         "gnupg")},
            **{p: {"version": VERSION, "held": True} for p in toolkit.packages()},
        },
        # Ubuntu's names; nvidia-settings has a version of its own, the toolkit's packages
        # are the toolkit's, a removed package (rc) is not installed: none of them is drift.
        "driver_packages": {
            "nvidia-driver-590": {"version": f"{DRIVER}-0ubuntu1", "held": True},
            "libnvidia-compute-590:amd64": {"version": f"{DRIVER}-0ubuntu1", "held": True},
            "nvidia-settings": {"version": "510.47.03-0ubuntu1", "held": True},
            "libnvidia-container1": {"version": VERSION, "held": False},
            "libnvidia-compute-580:amd64": {"version": None, "held": False},
        },
        "units": {"systemd": True, "units": {u: {"active": "active", "enabled": "enabled"}
                                              for u in ("docker", "podman.socket")}},
        "daemon_json": {"insecure-registries": ["10.0.0.5:5000"], "log-driver": "local",
                        "runtimes": {"nvidia": {"path": "nvidia-container-runtime",
                                                "args": []}}},
        "gpu": {"smi": True, "present": True, "gpus": ["NVIDIA H100 80GB HBM3"],
                "driver": "590.48.01", "error": None},
        "keyring": {"sha256": "c" * 64, "recorded_sha256": "c" * 64,
                    "recorded_url": (spec.get("nvidia_toolkit") or {}).get("key")},
        "cdi": "590.48.01",
        "repo": {"exists": True, "checkout": True, "head": REF, "origin": "https://x/code.git",
                 "has_ref": True, "dirt": [], "eol_only": [], "local": [], "crlf": [],
                 "attributes": list(LF_ATTRIBUTES), "lockfile_sha256": LOCK, "venv": True,
                 "installed": f"{LOCK} keep=torch", "writers": ["0", "0", "0"]},
        "ray": {"running": [], "latest": None, "sessions": {}},
        "cores": {},
        "finders": {},
        "flashinfer": {"cache": None, "installed": {}},
        "cpus": 8,
        "os_release": {"kernel": "6.1.0", "os_id": "debian", "os_version": "12",
                       "os_pretty": "Debian GNU/Linux 12 (bookworm)"},
        "inspect": inspect_for("podman" if kind == "user" else kind),
        # scope: user: the login's tools, its Podman API (supervised), its login file
        "commands": {},
        "user_podman": {"uid": 1000, "user": "alice", "linger": False, "subuid": True,
                        "subgid": True, "runtime_dir": "/tmp/podman-run-1000",
                        "supervised_dir": 1000, "service": 4242, "socket": "socket",
                        "answers": True},
        "profile": {"file": ".profile", "exists": True, "damaged": [],
                    "blocks": copy.deepcopy(PROFILE_BLOCKS)},
    }  # fmt: skip


def reader(state: dict[str, Any]) -> Callable[..., Any]:
    def read(cls: type, **kwargs: Any) -> Any:
        if cls is FileDigests:
            return {p: state["files"].get(p) for p in kwargs["paths"]}
        if cls is SecretDigests:
            files = {p: state["files"].get(p) for p in kwargs["paths"]}
            return {"public": state.get("host_public", HOST_PUBLIC), "files": files}
        if cls is DebStatus:
            return {p: state["packages"][p] for p in kwargs["packages"] if p in state["packages"]}
        if cls is DebProviders:
            return state.get("provided", {})
        if cls is DriverPackages:
            assert kwargs["globs"] == driver.globs()
            return state["driver_packages"]
        if cls is Commands:
            return {n: state["commands"].get(n, True) for n in kwargs["names"]}
        if cls is CpuQuota:
            return {"nproc": state["cpus"], "cpus": None}
        if cls in (ContainerInspect, UserContainerInspect):
            return {"inspect": state["inspect"], "oom_kill": None}
        simple = {Units: "units", UserPodman: "user_podman", LoginProfile: "profile",
                  JsonFile: "daemon_json", NvidiaGpus: "gpu",
                  ToolkitKeyring: "keyring", CdiSpec: "cdi", OsRelease: "os_release",
                  RepoState: "repo", RaySessions: "ray",
                  CoreFiles: "cores", EditableFinders: "finders", FlashinferCache: "flashinfer",
                  UserRaySessions: "ray", UserCoreFiles: "cores"}  # fmt: skip
        return state[simple[cls]]

    return read


def _set(*path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(state: dict[str, Any]) -> None:
        target = state
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _pkg(name: str, **value: Any) -> Callable[[dict[str, Any]], None]:
    return _set("packages", name, value={"version": "1", "held": False, **value})


NET = "/root/.netrc"
PRESENT = {"sha256": "0" * 64, "mode": "644", "owner": "root"}
STALE_CACHE = {"cache": {"path": "/c", "kib": 4, "mtime": 1}, "installed": {}}
CASES: dict[str, tuple[str, Callable[[dict[str, Any]], None]]] = {
    # id: (engine, mutation)
    "packages.missing": ("docker", _pkg("tmux", version=None)),
    "secret.missing": ("docker", _set("files", NET, value=None)),
    "secret.content": ("docker", _set("files", NET, "sha256", value="0" * 64)),
    "secret.mode": ("docker", _set("files", NET, "mode", value="644")),
    "secret.owner": ("docker", lambda s: (s["spec"]["secrets"][0].update(owner="alice"))),
    "secret.source": ("docker", lambda s: s["spec"]["secrets"][0].update(src="/nonexistent")),
    "core_dumps.file": ("docker", _set("files", next(iter(core_dumps.MANAGED_FILES)), value=None)),
    "repo.missing": ("docker", _set("repo", "exists", value=False)),
    "repo.not_checkout": ("docker", _set("repo", "checkout", value=False)),
    "repo.origin": ("docker", _set("repo", "origin", value="https://elsewhere/code.git")),
    "repo.credential": ("docker", lambda s: (
        s["spec"]["repos"]["/srv/code"].update(url=TOKEN_URL), s["repo"].update(origin=TOKEN_URL))),
    "repo.dirty": ("docker", _set("repo", "dirt", value=[" M train.py"])),
    "repo.local_commits": ("docker", _set("repo", "local", value=["abc1234 my fix"])),
    "repo.writable": ("docker", _set("repo", "writers", value=["0", "1000", "0"])),
    "repo.attributes": ("docker", _set("repo", "attributes", value=[])),
    "repo.ref": ("docker", _set("repo", "head", value="c" * 40)),
    "repo.crlf": ("docker", _set("repo", "crlf", value=["run.sh"])),
    "repo.env": ("docker", lambda s: s["spec"]["repos"]["/srv/code"]["python"].update(keep=[])),
    "repo.lockfile_missing": ("docker", _set("repo", "lockfile_sha256", value=None)),
    "engine.systemd": ("docker", _set("units", "systemd", value=False)),
    "engine.service": ("docker", _set("units", "units", "docker", "active", value="failed")),
    "engine.daemon_json": ("docker", _set("daemon_json", value=None)),
    "engine.insecure_registries": ("docker", _set("daemon_json", "insecure-registries", value=[])),
    "toolkit.runtime": ("docker", _set("daemon_json", "runtimes", value={"runc": {}})),
    "engine.registries": ("podman", _set("files", engine.PODMAN_REGISTRIES, "mode", value="600")),
    "engine.socket": ("podman", _set("units", "units", "podman.socket", "enabled", value="no")),
    "engine.docker_host": ("podman", _set("files", engine.DOCKER_HOST_PROFILE, value=None)),
    "compose.plugin": ("docker", _set("files", compose.PLUGIN, "sha256", value="0" * 64)),
    "driver.unattended": ("podman", _set("files", driver.UNATTENDED, value=None)),
    "driver.hold": ("docker", _set("driver_packages", "libnvidia-compute-590:amd64", "held",
                                   value=False)),
    "driver.version": ("docker", _set("gpu", "driver", value="580.95.05")),
    "driver.missing": ("docker", lambda s: (s.update(driver_packages={}),
                                            s["gpu"].update(present=False, error="no GPU"))),
    "toolkit.keyring": ("docker", _set("keyring", "recorded_url", value="https://mirror/key")),
    "toolkit.apt": ("docker", _set("files", toolkit.SOURCES_LIST, "sha256", value="0" * 64)),
    "toolkit.version": ("docker", _pkg("libnvidia-container1", version="1.16.0-1", held=True)),
    "toolkit.hold": ("docker", _pkg("libnvidia-container1", version=VERSION, held=False)),
    "toolkit.oci_hook": ("podman", _set("files", toolkit.OCI_HOOK, value=PRESENT)),
    "toolkit.cdi": ("podman", _set("cdi", value="570.124.06")),
    "toolkit.gpu": ("docker", lambda s: (s["spec"].update(gpu="required"),
                                         s["gpu"].update(present=False, error="no GPU"))),
    "cleanup.ray_sessions": ("docker", _set("ray", "sessions", value={"/tmp/ray/session_1": 4})),
    "cleanup.core_files": ("docker", _set("cores", value={"/tmp/core.1": 4096})),
    "cleanup.editable_finders": ("docker", _set("finders", value={"/f.py": ["/f.pth"]})),
    "cleanup.flashinfer_cache": ("docker", _set("flashinfer", value=STALE_CACHE)),
    "container.engine": ("docker", lambda s: s["spec"].update(engine="none")),
    "container.missing": ("docker", _set("inspect", value=None)),
    "container.not_running": ("podman", _set("inspect", "State", value={"Running": False,
                                                                       "Status": "exited"})),
    "container.image": ("docker", _set("inspect", "Config", "Image", value="r/train:latest")),
    "container.shm_size": ("podman", _set("inspect", "HostConfig", "ShmSize", value=64 * 1024**2)),
    "container.user": ("docker", _set("inspect", "Config", "User", value="")),
    "container.network": ("podman", _set("inspect", "HostConfig", "NetworkMode", value="bridge")),
    "container.gpus": ("docker", _set("inspect", "HostConfig", "DeviceRequests", value=[])),
    "container.mounts": ("podman", _set("inspect", "Mounts", value=[])),
    "container.env": ("docker", _set("inspect", "Config", "Env", value=["HF_TOKEN=other"])),
    "container.ulimits": ("podman", _set("inspect", "HostConfig", "Ulimits", value=[])),
    "container.command": ("docker", _set("inspect", "Config", "Cmd", value=["bash"])),
    "container.restart": ("podman", _set("inspect", "HostConfig", "RestartPolicy",
                                         value={"Name": "always"})),
}  # fmt: skip
LINGERING = {
    "linger": True,
    "runtime_dir": "/run/user/1000",
    "service": None,
    "manager": "running",
    "unit_active": "active",
    "unit_enabled": "enabled",
}
USER_CASES: dict[str, tuple[str, Callable[[dict[str, Any]], None]]] = {
    "tools.missing": ("user", _set("commands", value={"podman": False})),
    "engine.rootless": ("user", _set("user_podman", "subgid", value=False)),
    "engine.user_service": ("user", lambda s: s["user_podman"].update(answers=False,
                                                                       service=None)),
    "core_dumps.profile": ("user", _set("profile", "blocks", "core_dumps", value=[])),
}  # fmt: skip
CASES.update(USER_CASES)
REFUSED = {"secret.source", "tools.missing", "engine.rootless", "repo.not_checkout",
           "repo.origin", "repo.dirty",
           "repo.local_commits", "repo.lockfile_missing", "repo.writable", "engine.systemd",
           "engine.daemon_json",
           "toolkit.gpu", "driver.version", "driver.missing", "container.engine",
           *(f"container.{f}" for f in FIELD_NAMES)}  # fmt: skip


def changes(kind: str, mutation: Callable[[dict[str, Any]], None] | None = None) -> list:
    state = copy.deepcopy(converged(kind))
    if mutation:
        mutation(state)
    return plan_host(state["spec"], reader(state))


@pytest.mark.parametrize("kind", ["docker", "podman", "user"])
def test_a_converged_host_has_nothing_to_change(kind: str):
    assert changes(kind) == []


# scope: user, one difference at a time: the ids a system-scope host shares, and how each
# reads for a user (what it says to do, whether the converge refuses).
USER_ROWS: dict[str, tuple[Callable[[dict[str, Any]], None], str, bool]] = {
    "socket gone, service dead": (
        lambda s: s["user_podman"].update(answers=False, service=None, socket="missing"),
        "engine.user_service", False),
    "stale socket": (lambda s: s["user_podman"].update(answers=False, service=None),
                     "engine.user_service", False),
    "hung service": (_set("user_podman", "answers", value=False), "engine.user_service", False),
    "socket down: containers unseen, not missing": (
        lambda s: (s["user_podman"].update(answers=False, service=None, socket="missing"),
                   s.update(inspect=None)),
        "engine.user_service", False),
    "another account's directory": (_set("user_podman", "supervised_dir", value=0),
                                    "engine.user_service", True),
    "lingering, socket unit stopped": (
        lambda s: s["user_podman"].update(LINGERING, unit_active="inactive", answers=False),
        "engine.socket", False),
    "lingering, no user manager": (
        lambda s: s["user_podman"].update(LINGERING, manager="offline"), "engine.socket", True),
    "lingering, supervised service still up": (
        lambda s: s["user_podman"].update(LINGERING, service=4242), "engine.user_service", False),
    "DOCKER_HOST line removed": (_set("profile", "blocks", "docker_host", value=[]),
                                 "engine.docker_host", False),
    "core line removed": (lambda s: s["profile"]["blocks"].pop("core_dumps"),
                          "core_dumps.profile", False),
    "block without its end": (_set("profile", "damaged", value=["docker_host"]),
                              "engine.docker_host", True),
    "registries file gone": (_set("files", REGISTRIES, value=None), "engine.registries", False),
    "git missing": (_set("commands", value={"git": False}), "tools.missing", True),
    "the user's core file": (_set("cores", value={"/tmp/core.1": 4096}), "cleanup.core_files",
                             False),
    "driver moved": (_set("gpu", "driver", value="580.95.05"), "driver.version", True),
}  # fmt: skip


@pytest.mark.parametrize("row", sorted(USER_ROWS))
def test_user_scope_differences(row: str):
    mutation, change_id, refused = USER_ROWS[row]
    [change] = changes("user", mutation)
    assert (change.id, change.refused) == (change_id, refused)
    if change_id == "engine.user_service" and not refused:
        actual = {"socket gone, service dead": "no service", "stale socket": "a stale socket, "
                  "no service", "hung service": "running (pid 4242), not answering"}  # fmt: skip
        assert change.actual == actual.get(row, "no service" if "unseen" in row else
                                           "running (pid 4242)")  # fmt: skip
    assert "apt" not in change.action and "sudo" not in change.action


def test_user_scope_manages_nothing_of_root():
    state = copy.deepcopy(converged("user"))
    state["files"] = {
        REGISTRIES: state["files"][REGISTRIES],
        HOME_NETRC: state["files"][HOME_NETRC],
    }
    state["packages"] = {}  # nothing read from dpkg: no /etc file, package or hold is drift
    state["driver_packages"]["nvidia-driver-590"]["held"] = False
    assert plan_host(state["spec"], reader(state)) == []


def test_every_change_id_has_a_case_and_every_case_an_id():
    assert set(CASES) == set(CHANGE_IDS)
    source = " ".join(p.read_text() for p in PLANS_DIR.glob("*.py"))
    literal = set(
        re.findall(
            r'"((?:packages|secret|core_dumps|repo|engine|compose|driver|toolkit|cleanup|container'
            r'|tools)\.[a-z_]+)"',
            source,
        )
    )
    literal -= {"toolkit.yaml", "driver.yaml"}  # data files' names, not ids
    assert literal <= set(CHANGE_IDS), literal - set(CHANGE_IDS)


@pytest.mark.parametrize(
    ("change_id", "field", "said"),
    [
        ("cleanup.core_files", "actual", "1 core file, 4096 bytes"),
        ("cleanup.ray_sessions", "actual", "1 stale session, 4 KiB"),
        ("cleanup.editable_finders", "actual", "1 finder of deleted sources"),
        ("core_dumps.profile", "expected", "gpurig's 1 line"),
    ],
)
def test_a_count_of_one_is_said_as_one(change_id: str, field: str, said: str):
    [change] = [c for c in changes(*CASES[change_id]) if c.id == change_id]
    assert getattr(change, field) == said


@pytest.mark.parametrize("change_id", sorted(CASES))
def test_the_difference_is_found_with_its_id(change_id: str):
    kind, mutation = CASES[change_id]
    found = changes(kind, mutation)
    assert change_id in [c.id for c in found]
    for change in found:
        assert change.id in CHANGE_IDS and change.expected and change.actual and change.action
        assert change.refused == (change.id in REFUSED) or change.id.startswith("container.")
    for finding in findings(found):
        assert finding.severity == ("warn" if finding.id.startswith("cleanup.") else "error")
        refused = {c.refused for c in found if c.subject == finding.subject and c.id in finding.ids}
        assert refused == {finding.action == "refused"}
    assert change_id in {i for f in findings(found) for i in f.ids}


def test_a_recreated_container_is_one_finding_with_its_field_differences():
    """What the demo's hand-made container shows: seven fields, one refusal, said once."""

    def recreated_by_hand(state: dict[str, Any]) -> None:
        host = state["inspect"]["HostConfig"]
        host.update(ShmSize=64 * 1024**2, NetworkMode="bridge", Ulimits=[],
                    RestartPolicy={"Name": "no"})  # fmt: skip
        state["inspect"]["Config"].update(User="", Env=["PATH=/usr/bin"])
        state["inspect"]["Mounts"] = []

    found = changes("docker", recreated_by_hand)
    assert len(found) > 1 and {c.subject for c in found} == {"container train"}
    [finding] = findings(found)
    assert (finding.subject, finding.action, finding.id) == (
        "container train", "refused", "container.differs",
    )  # fmt: skip
    assert [d.id for d in finding.differences] == [c.id for c in found]
    assert finding.fix.count("stop its job first") == 1
    shown = {d.field: (d.expected, d.actual) for d in finding.differences}
    assert shown["shm_size"] == ("1 GiB", "64 MiB")
    assert shown["user"][1] == "(image default)"
    assert "core=0:0" in shown["ulimits"][0] and "{" not in shown["ulimits"][0]


def test_a_file_is_one_finding_whatever_changed_in_it():
    def loosened(state: dict[str, Any]) -> None:
        state["files"][NET]["mode"] = "644"
        state["spec"]["secrets"][0].update(owner="alice")

    found = changes("docker", loosened)
    [finding] = findings(found)
    assert {d.field for d in finding.differences} == {"mode", "owner"}
    assert finding.ids == ("secret.mode", "secret.owner")


def test_a_secret_without_a_declared_owner_is_roots():
    """No `owner` means root's in system scope: a secret another account came to own (she
    placed it in her directory) is drift, not silence."""

    def taken(state: dict[str, Any]) -> None:
        state["spec"]["secrets"][0].pop("owner", None)
        state["files"][NET]["owner"] = "alice"

    [change] = changes("docker", taken)
    assert (change.id, change.expected, change.actual) == ("secret.owner", "root", "alice")


def test_a_stopped_container_with_drift_is_recreated_not_refused():
    def stopped_small_shm(state: dict[str, Any]) -> None:
        state["inspect"]["State"] = {"Running": False, "Status": "exited"}
        state["inspect"]["HostConfig"]["ShmSize"] = 64 * 1024**2

    [change] = changes("docker", stopped_small_shm)
    assert change.id == "container.shm_size" and not change.refused


def test_a_running_container_with_drift_is_refused_unless_opted_in():
    kind, mutation = CASES["container.shm_size"]
    [refused] = changes(kind, mutation)
    assert refused.refused and "allow_recreate=true" in refused.action
    state = copy.deepcopy(converged(kind))
    mutation(state)
    [allowed] = plan_host(state["spec"], reader(state), allow_recreate=True)
    assert not allowed.refused and allowed.data["recreate"]


def test_credentials_in_env_are_never_shown():
    [change] = changes(*CASES["container.env"])
    assert "hf_secret" not in change.expected + change.actual
    assert "<redacted>" in change.expected


def test_secret_digests_are_keyed_by_the_exchange():
    key = shared_key(HOST_PUBLIC)
    assert local_digest(SECRET, key) == host_digest(SECRET)
    assert local_digest(SECRET, key) != hashlib.sha256(Path(SECRET).read_bytes()).hexdigest()
    with pytest.raises(ValueError, match="out of range"):
        shared_key("1")


def test_a_host_without_python3_gets_its_secret_uploaded():
    state = copy.deepcopy(converged("docker"))
    state["host_public"] = None
    [change] = [c for c in plan_host(state["spec"], reader(state)) if c.id.startswith("secret")]
    assert change.id == "secret.content" and "no python3" in change.actual


def test_foreign_daemon_json_keys_are_kept_and_not_drift():
    state = copy.deepcopy(converged("docker"))
    state["daemon_json"]["runtimes"] = {**engine.NVIDIA_RUNTIME, "crun": {"path": "/usr/bin/crun"}}
    assert plan_host(state["spec"], reader(state)) == []
    state["daemon_json"]["insecure-registries"] = []
    [change] = plan_host(state["spec"], reader(state))
    assert change.data["daemon_json"]["log-driver"] == "local"
    assert "crun" in change.data["daemon_json"]["runtimes"]


def test_a_stopped_socket_is_one_finding_not_also_an_api_that_does_not_answer():
    """One cause, one finding: the converge starts the socket (engine.socket), so the API that
    does not answer meanwhile (engine.api) is not a second finding on podman.socket."""
    kind, mutation = CASES["engine.socket"]
    state = copy.deepcopy(converged(kind))
    mutation(state)
    spec = state["spec"]
    silent = {"exists": True, "answers": False}
    api = [f for rule in container_checks.RULES for f in rule(spec, lambda *_, **__: silent)]
    assert [(f.id, f.subject) for f in api] == [("engine.api", "podman.socket")]
    reported = one_per_cause([*findings(plan_host(spec, reader(state))), *api])
    assert [f.id for f in reported if f.subject == "podman.socket"] == ["engine.socket"]
    # Without the stopped unit, a socket that does not answer is a finding of its own.
    assert one_per_cause(api) == api


@pytest.mark.parametrize(("version", "absent"), [("12", []), ("13", ["docker-cli"])])
def test_docker_installs_the_client_its_release_splits_out(version: str, absent: list[str]):
    """Debian 13's docker.io only recommends docker-cli (the converge installs without
    recommends): the plan names it there, and only there (Debian 12 has no such package)."""
    state = converged("docker")
    state["os_release"]["os_version"] = version
    found = [c for c in plan_host(state["spec"], reader(state)) if c.id == "packages.missing"]
    assert [c.data["packages"] for c in found] == ([absent] if absent else [])
    state["packages"]["docker-cli"] = {"version": "26.1.5", "held": False}
    assert not [c for c in plan_host(state["spec"], reader(state)) if c.id == "packages.missing"]


@pytest.mark.parametrize("release", ["12", "13"])
def test_dockers_own_engine_packages_are_the_engine(release: str):
    """Docker Engine from Docker's repository (docker-ce, docker-ce-cli, containerd.io):
    installing docker.io there would remove it under running containers, so it is the engine."""
    state = converged("docker")
    state["os_release"]["os_version"] = release
    del state["packages"]["docker.io"]
    for name in ("docker-ce", "docker-ce-cli", "containerd.io"):
        state["packages"][name] = {"version": "5:28.0.0-1", "held": False}
    assert not [c for c in plan_host(state["spec"], reader(state)) if c.id == "packages.missing"]
    del state["packages"]["docker-ce"]  # Docker's CLI alone runs no engine
    [found] = [c for c in plan_host(state["spec"], reader(state)) if c.id == "packages.missing"]
    assert found.data["packages"][0] == "docker.io"


def test_microsofts_moby_engine_is_the_engine():
    """Azure's Ubuntu images run Microsoft's moby-engine, which conflicts with docker.io: it
    is the engine, as docker-ce is."""
    state = converged("docker")
    del state["packages"]["docker.io"]
    state["packages"]["moby-engine"] = {"version": "25.0.3-ubuntu22.04u1", "held": False}
    assert not [c for c in plan_host(state["spec"], reader(state)) if c.id == "packages.missing"]


def test_a_package_another_one_provides_is_installed():
    """containerd.io provides (and conflicts with) runc: a spec asking for runc is served."""
    state = converged("docker")
    state["spec"]["packages"] = ["tmux", "runc"]
    [found] = [c for c in plan_host(state["spec"], reader(state)) if c.id == "packages.missing"]
    assert found.data["packages"] == ["runc"]
    state["provided"] = {"runc": "containerd.io"}
    assert not [c for c in plan_host(state["spec"], reader(state)) if c.id == "packages.missing"]
