"""The plans on a converged host: nothing to change; then one hand-made difference at a time,
for every change id the plans can emit, on a Docker and a Podman host. The same plans drive
the converge and the drift report, so this table is both."""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from facts.gpurig_cleanup import CoreFiles, EditableFinders, FlashinferCache, RaySessions
from facts.gpurig_container import ContainerInspect, CpuQuota
from facts.gpurig_files import FileDigests
from facts.gpurig_json import JsonFile
from facts.gpurig_nvidia import CdiSpec, NvidiaGpus, ToolkitKeyring
from facts.gpurig_packages import DebStatus, DriverPackages
from facts.gpurig_repo import LF_ATTRIBUTES, RepoState
from facts.gpurig_units import Units
from gpurig.container import FIELD_NAMES
from gpurig.plans import CHANGE_IDS, compose, core_dumps, driver, engine, plan_host, toolkit
from gpurig.plans.repos import env_marker
from gpurig.plans.secrets import SALT, local_digest
from gpurig.spec import normalise

PLANS_DIR = Path(__file__).resolve().parents[2] / "gpurig" / "plans"
DIGEST = "sha256:" + "a" * 64
REF = "b" * 40
LOCK = "1" * 64
SECRET = str(Path(__file__).resolve().parent / "operations" / "netrc.sample")
VERSION = "1.17.8-1"
DRIVER = "590.48.01"
COMPOSE_SHA = "d" * 64


def spec_for(kind: str) -> dict[str, Any]:
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


def wanted_files(spec: dict[str, Any]) -> dict[str, str | None]:
    """Every file the plans manage, with the content a converged host has (None: absent)."""
    files: dict[str, str | None] = dict(core_dumps.MANAGED_FILES)
    files[toolkit.SOURCES_LIST] = toolkit.sources_list(spec["nvidia_toolkit"]["repo"])
    files[toolkit.PREFERENCES] = toolkit.preferences(toolkit.packages(), VERSION)
    files[driver.UNATTENDED] = driver.unattended_conf()
    if spec["engine"] == "podman":
        files[engine.PODMAN_REGISTRIES] = engine.podman_registries(spec["insecure_registries"])
        files[engine.DOCKER_HOST_PROFILE] = engine.DOCKER_HOST_LINE
        files[toolkit.OCI_HOOK] = None
    return files


def converged(kind: str) -> dict[str, Any]:
    """A converged host's state, per fact class (mutations edit it)."""
    spec = spec_for(kind)
    files = {
        path: {"sha256": hashlib.sha256(c.encode()).hexdigest(), "mode": "644", "owner": "root"}
        for path, c in wanted_files(spec).items()
        if c is not None
    }
    files["/root/.netrc"] = {"sha256": local_digest(SECRET), "mode": "600", "owner": "root"}
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
                        "runtimes": engine.NVIDIA_RUNTIME},
        "gpu": {"smi": True, "present": True, "gpus": ["NVIDIA H100 80GB HBM3"],
                "driver": "590.48.01", "error": None},
        "keyring": {"sha256": "c" * 64, "recorded_sha256": "c" * 64,
                    "recorded_url": spec["nvidia_toolkit"]["key"]},
        "cdi": "590.48.01",
        "repo": {"exists": True, "checkout": True, "head": REF, "origin": "https://x/code.git",
                 "has_ref": True, "dirt": [], "eol_only": [], "local": [], "crlf": [],
                 "attributes": list(LF_ATTRIBUTES), "lockfile_sha256": LOCK, "venv": True,
                 "installed": env_marker(LOCK, ["torch"])},
        "ray": {"running": [], "latest": None, "sessions": {}},
        "cores": {},
        "finders": {},
        "flashinfer": {"cache": None, "installed": {}},
        "cpus": 8,
        "inspect": inspect_for(kind),
    }  # fmt: skip


def reader(state: dict[str, Any]) -> Callable[..., Any]:
    def read(cls: type, **kwargs: Any) -> Any:
        if cls is FileDigests:
            return {p: state["files"].get(p) for p in kwargs["paths"]}
        if cls is DebStatus:
            return {p: state["packages"][p] for p in kwargs["packages"] if p in state["packages"]}
        if cls is DriverPackages:
            assert kwargs["globs"] == driver.globs()
            return state["driver_packages"]
        if cls is CpuQuota:
            return {"nproc": state["cpus"], "cpus": None}
        if cls is ContainerInspect:
            return {"inspect": state["inspect"], "oom_kill": None}
        simple = {Units: "units", JsonFile: "daemon_json", NvidiaGpus: "gpu",
                  ToolkitKeyring: "keyring", CdiSpec: "cdi", RepoState: "repo", RaySessions: "ray",
                  CoreFiles: "cores", EditableFinders: "finders",
                  FlashinferCache: "flashinfer"}  # fmt: skip
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
    "repo.dirty": ("docker", _set("repo", "dirt", value=[" M train.py"])),
    "repo.local_commits": ("docker", _set("repo", "local", value=["abc1234 my fix"])),
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
REFUSED = {"secret.source", "repo.not_checkout", "repo.origin", "repo.dirty",
           "repo.local_commits", "repo.lockfile_missing", "engine.systemd", "engine.daemon_json",
           "toolkit.gpu", "driver.version", "driver.missing", "container.engine",
           *(f"container.{f}" for f in FIELD_NAMES)}  # fmt: skip


def changes(kind: str, mutation: Callable[[dict[str, Any]], None] | None = None) -> list:
    state = copy.deepcopy(converged(kind))
    if mutation:
        mutation(state)
    return plan_host(state["spec"], reader(state))


@pytest.mark.parametrize("kind", ["docker", "podman"])
def test_a_converged_host_has_nothing_to_change(kind: str):
    assert changes(kind) == []


def test_every_change_id_has_a_case_and_every_case_an_id():
    assert set(CASES) == set(CHANGE_IDS)
    source = " ".join(p.read_text() for p in PLANS_DIR.glob("*.py"))
    literal = set(
        re.findall(
            r'"((?:packages|secret|core_dumps|repo|engine|compose|driver|toolkit|cleanup|container)'
            r'\.[a-z_]+)"',
            source,
        )
    )
    literal -= {"toolkit.yaml", "driver.yaml"}  # data files' names, not ids
    assert literal <= set(CHANGE_IDS), literal - set(CHANGE_IDS)


@pytest.mark.parametrize("change_id", sorted(CASES))
def test_the_difference_is_found_with_its_id(change_id: str):
    kind, mutation = CASES[change_id]
    found = changes(kind, mutation)
    assert change_id in [c.id for c in found]
    for change in found:
        assert change.id in CHANGE_IDS and change.expected and change.actual and change.action
        assert change.refused == (change.id in REFUSED) or change.id.startswith("container.")
        finding = change.finding()
        assert finding.severity == ("warn" if change.id.startswith("cleanup.") else "error")


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


def test_secret_digests_are_salted():
    assert local_digest(SECRET) != hashlib.sha256(Path(SECRET).read_bytes()).hexdigest()
    assert local_digest(SECRET) == local_digest(SECRET, SALT)


def test_foreign_daemon_json_keys_are_kept_and_not_drift():
    state = copy.deepcopy(converged("docker"))
    state["daemon_json"]["runtimes"] = {**engine.NVIDIA_RUNTIME, "crun": {"path": "/usr/bin/crun"}}
    assert plan_host(state["spec"], reader(state)) == []
    state["daemon_json"]["insecure-registries"] = []
    [change] = plan_host(state["spec"], reader(state))
    assert change.data["daemon_json"]["log-driver"] == "local"
    assert "crun" in change.data["daemon_json"]["runtimes"]
