"""check(): a clean host has no findings, and every check id has a case that fires it: one
case table per domain, equal to the domain's ids.

The checks read the facts' values through a reader; the GPU facts of the clean host are parsed
from the H100 80GB VM's recordings (driver 580.159.04, 2026-11-22), not written by hand.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection
from typing import Any

import pytest

from gpurig.checks import container as container_checks
from gpurig.checks import fabric as fabric_checks
from gpurig.checks import gpu as gpu_checks
from gpurig.checks import interconnect as interconnect_checks
from gpurig.checks import node as node_checks
from gpurig.checks import over_time
from gpurig.checks.all import CHECK_IDS, check, compat, compat_checks
from gpurig.checks.judge import SUDO_PASSWORD, Probed, report
from gpurig.checks.node import key_changed, unreachable
from gpurig.checks.rules import rules
from gpurig.facts.gpurig_container import ContainerInspect, ContainerTorch
from gpurig.facts.gpurig_fabric import Fabric
from gpurig.facts.gpurig_node import (
    CgroupLeaks,
    CgroupMemory,
    DiskSpace,
    EngineSocket,
    HostMemory,
    Login,
    LoginShell,
)
from gpurig.facts.gpurig_nvidia import GpuHealth, NvidiaGpus
from gpurig.facts.gpurig_repo import EnvImports
from gpurig.facts.round_trip import FactFailed, Unreadable, read_key
from gpurig.plans import CHANGE_IDS
from gpurig.read import node_parse
from gpurig.report import fleet
from gpurig.spec.finding import Finding
from gpurig.spec.inventory import Host, SshSettings
from gpurig.spec.model import normalise
from tests.unit import test_fabric, test_interconnect, test_over_time
from tests.unit.fact_values import gpu_values, h100_vm, reader
from tests.unit.gpu_fixtures import read_fixture
from tests.unit.test_gpu_checks import FIRES_ON_RECORDING, NO_RECORDING

DIGEST = "sha256:" + "a" * 64
REF = "b" * 40

SPEC: dict[str, Any] = normalise(
    {
        "engine": "docker",
        "gpu": "required",
        "core_dumps": "disabled",
        "nvidia_toolkit": {"version": "1.17.8-1"},
        "containers": {
            "train": {
                "image": f"registry.example/train@{DIGEST}",
                "shm_size": "1g",
                "user": "root",
                "gpus": "all",
                "network": "host",
                "mounts": ["/data:/data:ro", "cache:/cache"],
                "env": {"PYTHONUNBUFFERED": "1"},
                "ulimits": {"core": 0, "nofile": "1024:4096", "memlock": -1},
                "command": ["sleep", "infinity"],
                "restart": {"policy": "on-failure", "max_retries": 5},
                "recreate": "if-stopped",
            }
        },
        "repos": {
            "/srv/code": {"url": "https://x/y.git", "ref": REF, "python": {"lockfile": "uv.lock"}}
        },
        "cleanup": {"ray_sessions": True, "core_files": True},
        "checks": {"disk_free_min": "10g", "inodes_free_min_pct": 10},
    }
)

INSPECT: dict[str, Any] = {
    "State": {"Running": True, "Restarting": False, "Status": "running"},
    "RestartCount": 0,
    "Config": {
        "Image": f"registry.example/train@{DIGEST}",
        "User": "root",
        "Env": ["PATH=/usr/bin", "PYTHONUNBUFFERED=1"],
        "Cmd": ["sleep", "infinity"],
    },
    "HostConfig": {
        "ShmSize": 1024**3,
        "NetworkMode": "host",
        "DeviceRequests": [
            {"Driver": "", "Count": -1, "DeviceIDs": None, "Capabilities": [["gpu"]]}
        ],
        "Ulimits": [
            {"Name": "core", "Soft": 0, "Hard": 0},
            {"Name": "nofile", "Soft": 1024, "Hard": 4096},
            {"Name": "memlock", "Soft": -1, "Hard": -1},
        ],
        "RestartPolicy": {"Name": "on-failure", "MaximumRetryCount": 5},
    },
    "Mounts": [
        {"Type": "bind", "Source": "/data", "Destination": "/data", "RW": False},
        {
            "Type": "volume",
            "Name": "cache",
            "Source": "/var/lib/docker/volumes/cache/_data",
            "Destination": "/cache",
            "RW": True,
        },
    ],
}

GiB = 1024**3
DISK = {"path": "/", "exists": True, "mount": "/", "free_bytes": 100 * GiB,
        "inodes_total": 1000, "inodes_free": 500}  # fmt: skip
VALUES: dict[type, Any] = {
    Login: {"uid": 0, "user": "root", "sudo": False},
    HostMemory: {"total_bytes": 16 * GiB, "percpu": {"bytes": None, "source": None}},
    LoginShell: {"ulimit_c": "0"},
    DiskSpace: [DISK, {**DISK, "path": "/srv/code"}],
    EngineSocket: {"exists": False, "answers": None},
    ContainerInspect: {"train": {"inspect": INSPECT, "oom_kill": 0}},
    ContainerTorch: {
        "train": {"version": "2.7.0", "cuda": "12.8", "arch_list": ["sm_80", "sm_90"]}
    },
    CgroupMemory: {"limit": None, "oom_kill": 0},
    CgroupLeaks: {"count": None, "percpu": {"bytes": None, "source": None}},
    Fabric: Fabric().default(),  # no RDMA device and no interface: the fabric is not declared
    **h100_vm(),  # the GPU facts of the H100 80GB VM (driver 580.159.04), all recorded on it
}

Mutation = Callable[[dict[str, Any], dict[type, Any]], None]


def _podman(spec: dict[str, Any], values: dict[type, Any]) -> None:
    spec["engine"] = "podman"
    spec["podman_socket"] = True
    values[EngineSocket] = {"exists": True, "answers": True}
    host = values[ContainerInspect]["train"]["inspect"]["HostConfig"]
    del host["DeviceRequests"]
    host["Devices"] = [
        {"PathOnHost": "nvidia.com/gpu=all", "PathInContainer": "nvidia.com/gpu=all"}
    ]


def _set(fact: type, *path: Any, value: Any) -> Mutation:
    """A mutation setting one fact's value at a path of keys (ints index lists)."""

    def mutate(_spec: dict[str, Any], values: dict[type, Any]) -> None:
        target: Any = values
        for key in (fact, *path[:-1]):
            target = target[key]
        target[path[-1]] = value

    return mutate


def _spec(key: str, value: Any) -> Mutation:
    return lambda spec, _values: spec.update({key: value})


def _both(*mutations: Mutation) -> Mutation:
    def mutate(spec: dict[str, Any], values: dict[type, Any]) -> None:
        for mutation in mutations:
            mutation(spec, values)

    return mutate


def run(mutation: Mutation | None = None) -> list[Finding]:
    spec, values = copy.deepcopy(SPEC), copy.deepcopy(VALUES)
    if mutation:
        mutation(spec, values)
    return check(spec, reader(values))


# A case: the findings one state of a host gives.
Case = Callable[[], list[Finding]]


def on(*mutations: Mutation) -> Case:
    """The clean host with `mutations` applied, judged by check()."""
    return lambda: run(_both(*mutations))


NODE = Host("node-1", "10.0.0.4", SshSettings(), (), {}, "fleet.yaml", 0)


def reported(connect_error: str | None = None, state: dict[str, Any] | None = None) -> Case:
    """What drift's report says of a host that could not be read, or whose judging failed."""
    return lambda: report(Probed(NODE, state, connect_error)).findings


def _unreadable(fact: type) -> Mutation:
    return lambda _spec, values: values.update({fact: Unreadable(f"{fact.__name__}: not XML")})


def _imports(entry: dict[str, Any]) -> Mutation:
    """/srv/code declaring `python.imports`, its environment answering `entry`."""

    def mutate(spec: dict[str, Any], values: dict[type, Any]) -> None:
        spec["repos"]["/srv/code"]["python"]["imports"] = ["torch"]
        python = "/srv/code/.venv/bin/python"
        values[EnvImports] = {"/srv/code": {"python": python, "ran": False, "run_as": None,
                                            "refused": None, "report": None, "error": None,
                                            **entry}}  # fmt: skip

    return mutate


DISK_LOW = _set(DiskSpace, 0, "free_bytes", value=5 * GiB)
SMALL_HOST = _set(HostMemory, "total_bytes", value=512 * 1024**2)
NO_GPU = _set(NvidiaGpus, "gpus", value=None)
# One table per domain, equal to the domain's ids (test_every_domain_table_is_its_ids), each
# case firing its id (test_finding_fires): a new id without a case fails here.
NODE_CASES: dict[str, Case] = {
    "host.unreachable": reported("Connection refused"),
    "host.key_changed": reported("SSH host key error (Host key for 10.0.0.4 does not match.)"),
    "host.sudo_password": reported(SUDO_PASSWORD),
    "host.not_root": on(_set(Login, "uid", value=1000)),
    "state.unreadable": on(_unreadable(GpuHealth)),
    # A bug in a fact's parser (FactFailed) is gpurig's, reported as such, not the host's.
    "gpurig.internal_error": reported(state={read_key(Login, {}): FactFailed("Login: KeyError")}),
    "core_dumps.login_shell": on(_set(LoginShell, "ulimit_c", value="unlimited")),
    "disk.free": on(DISK_LOW),
    "disk.inodes": on(_set(DiskSpace, 0, "inodes_free", value=50)),
    "shm.size": on(SMALL_HOST),
    "host.oom_kill": on(_set(CgroupMemory, "oom_kill", value=2)),
    "host.cgroup_leak": on(_set(CgroupLeaks, "count", value=node_parse.cgroup_count(
        None, "nr_descendants 30000\nnr_dying_descendants 70001\n"))),
    "host.percpu_memory": on(_set(CgroupLeaks, "percpu", value={"bytes": 60 * 1000**3,
                                                                "source": "memory.stat percpu"})),
    "env.imports": on(_imports({"ran": True, "error": "the environment's python printed nothing"})),
    "env.imports_unchecked": on(_imports({"refused": "/srv/code is writable by uid 1000"})),
}  # fmt: skip
CONTAINER_CASES: dict[str, Case] = {
    "container.restarting": on(_set(ContainerInspect, "train", "inspect", "RestartCount", value=3)),
    "container.oom_kill": on(_set(ContainerInspect, "train", "oom_kill", value=2)),
    "engine.api": on(_podman, _set(EngineSocket, "answers", value=False)),
}
COMPAT_CASES: dict[str, Case] = {
    "compat.kernel_module": on(_set(NvidiaGpus, "kernel_module", "version", value="595.71.05")),
    "compat.driver_cuda": on(_set(ContainerTorch, "train", "cuda", value="13.9")),
    "compat.torch_arch": on(_set(ContainerTorch, "train", "arch_list", value=["sm_80"])),
}
CASES: dict[str, Case] = {**NODE_CASES, **CONTAINER_CASES, **COMPAT_CASES}
# Each domain's ids and its case table: this module's, and the GPU, interconnect and fabric
# modules', which fire theirs on recordings (and say why where none exists).
DOMAINS: dict[str, tuple[tuple[str, ...], Collection[str]]] = {
    "node": (node_checks.IDS, NODE_CASES),
    "container": (container_checks.IDS, CONTAINER_CASES),
    "compat": (compat.IDS, COMPAT_CASES),
    "gpu": (gpu_checks.IDS, {**FIRES_ON_RECORDING, **NO_RECORDING}),
    "interconnect": (interconnect_checks.IDS, test_interconnect.FIRES_ON_RECORDING),
    "fabric": (fabric_checks.IDS, {**test_fabric.FIRES_ON_RECORDING, **test_fabric.NO_RECORDING}),
    "over_time": (over_time.IDS, test_over_time.CASES),
}


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_every_domain_table_is_its_ids(domain: str) -> None:
    ids, cases = DOMAINS[domain]
    assert set(cases) == set(ids)
    assert len(ids) == len(set(ids))


def test_every_check_id_is_in_one_domain() -> None:
    every = [i for ids, _ in DOMAINS.values() for i in ids]
    assert sorted(every) == sorted(CHECK_IDS)


def test_one_table_row_per_id_with_a_remediation_and_a_source() -> None:
    """Every domain's ids, and nothing else, have a row in gpurig/data/checks.yaml."""
    domains = [node_checks.IDS, container_checks.IDS, gpu_checks.IDS, compat.IDS, fleet.IDS,
               interconnect_checks.IDS, fabric_checks.IDS, over_time.IDS]  # fmt: skip
    assert set(rules()["checks"]) == {i for ids in domains for i in ids}
    assert sum(len(ids) for ids in domains) == len(rules()["checks"])
    for check_id, row in rules()["checks"].items():
        assert row["severity"] in ("error", "warn"), check_id
        assert row["remediation"] in rules()["remediations"], check_id
        assert row["source"], check_id
        assert set(row.get("explained_by") or []) <= set(rules()["checks"]) | set(CHANGE_IDS)


def test_clean_host_has_no_findings() -> None:
    assert run() == []


def test_clean_podman_host_has_no_findings() -> None:
    assert run(_podman) == []


@pytest.mark.parametrize("finding_id", sorted(CASES))
def test_finding_fires(finding_id: str) -> None:
    findings = CASES[finding_id]()
    assert finding_id in [f.id for f in findings]
    for f in findings:
        assert f.id in CHECK_IDS
        assert f.severity in ("error", "warn")
        assert f.expected and f.actual and f.fix and f.subject
        assert (f.action, f.remediation) == ("manual", rules()["checks"][f.id]["remediation"])


# Checks of a state the spec declares. DESIGN (Findings): what the spec declares and the host
# does not do is `error`, whether the converge fixes it or only a person can (`warn` is advice
# about what the spec does not declare).
DECLARED = {
    "core_dumps.login_shell",  # core_dumps: disabled, and a login shell still gets cores
    "gpu.unexpected",  # gpu: absent, and the host has GPUs
    "gpu.missing",  # gpu: required, and the host has none
    "disk.free",  # checks.disk_free_min
    "disk.inodes",  # checks.inodes_free_min_pct
}


DECLARED_CASES: dict[str, Case] = {
    **CASES,
    "gpu.unexpected": on(_spec("gpu", "absent")),
    "gpu.missing": on(NO_GPU),
}


@pytest.mark.parametrize("finding_id", sorted(DECLARED))
def test_a_declared_state_not_in_effect_is_an_error(finding_id: str) -> None:
    [fired] = [f for f in DECLARED_CASES[finding_id]() if f.id == finding_id]
    assert fired.severity == "error"


def test_an_unreadable_fact_spoils_only_the_rules_reading_it() -> None:
    """One state.unreadable naming the fact, however many rules read it; the other rules
    still judge (here the disk)."""

    def unreadable(spec: dict[str, Any], values: dict[type, Any]) -> None:
        values[GpuHealth] = Unreadable("GpuHealth: ParseError('not XML')")

    findings = run(_both(unreadable, DISK_LOW))
    [odd] = [f for f in findings if f.id == "state.unreadable"]
    assert odd.actual == "GpuHealth: ParseError('not XML')" and odd.severity == "error"
    assert "disk.free" in [f.id for f in findings]


def test_a_bug_in_a_rule_is_not_the_hosts_output() -> None:
    """A KeyError (a read the test, or a snapshot, does not hold) fails loudly: gpurig's bug."""
    values = copy.deepcopy(VALUES)
    del values[HostMemory]
    with pytest.raises(KeyError):
        check(SPEC, reader(values))


def test_a_jetson_module_line_is_not_compared_with_the_driver() -> None:
    """/proc/driver/nvidia/version on a Jetson names its L4T release (35.3.1), not a driver."""
    jetson = read_fixture("proc_driver_nvidia_version_jetson-orin-nx_l4t-35.3.1.txt")
    module = NvidiaGpus.parse({"module": jetson})["kernel_module"]
    assert (module["version"], module["l4t"]) == ("35.3.1", True)
    assert "compat.kernel_module" not in [f.id for f in run(_set(NvidiaGpus, "kernel_module",
                                                                 value=module))]  # fmt: skip


def test_host_unreachable_has_the_finding_shape() -> None:
    f = unreachable("Connection refused")
    assert (f.id, f.severity, f.actual) == ("host.unreachable", "error", "Connection refused")
    assert f.fix


def test_host_key_changed_has_the_finding_shape() -> None:
    error = "SSH host key error (Host key for 10.0.0.4 does not match.)"
    f = key_changed("full-4", "fleet.yaml", error)
    assert (f.id, f.severity, f.actual) == ("host.key_changed", "error", error)
    assert f.message.startswith("full-4: host key does not match the one recorded in fleet.yaml")
    assert "gpurig onboard" in f.fix


def test_same_filesystem_reported_once() -> None:
    findings = run(_both(_set(DiskSpace, 0, "free_bytes", value=1),
                         _set(DiskSpace, 1, "free_bytes", value=1)))  # fmt: skip
    assert [f.id for f in findings] == ["disk.free"]


def test_warnings_and_errors() -> None:
    severity = {fid: {f.severity for f in case() if f.id == fid} for fid, case in CASES.items()}
    assert severity["container.restarting"] == {"warn"}
    assert {f.severity for f in run(NO_GPU) if f.id == "gpu.missing"} == {"error"}
    assert severity["disk.free"] == {"error"}


def test_an_nvml_mismatch_is_one_finding_and_torch_is_judged_by_the_library() -> None:
    """One cause, one finding: the library/module mismatch fires gpu.nvml_mismatch and, by the
    versions alone, compat.kernel_module (both errors, two fixes); gpu.nvml_mismatch says it.
    The torch builds are still judged against the library that loads after the reboot."""
    mismatch = _both(
        _set(NvidiaGpus, "gpus", value=None),
        _set(NvidiaGpus, "nvml_mismatch", value="570.124"),
        _spec("gpu", "auto"),
        _set(ContainerTorch, "train", "cuda", value="12.9"),
    )
    spec, values = copy.deepcopy(SPEC), copy.deepcopy(VALUES)
    mismatch(spec, values)
    read = reader(values)
    both = {f.id for rule in (*gpu_checks.RULES, *compat_checks.RULES) for f in rule(spec, read)}
    assert {"gpu.nvml_mismatch", "compat.kernel_module"} <= both
    findings = {f.id: f for f in run(mismatch)}
    assert "compat.kernel_module" not in findings
    assert findings["gpu.nvml_mismatch"].subject == "NVIDIA driver"
    assert "570.124" in findings["compat.driver_cuda"].actual
    assert findings["compat.driver_cuda"].subject == "container train"


def test_torch_on_a_mig_host_is_judged_by_the_slices_parent_gpu() -> None:
    """A MIG slice has no capability of its own: torch must fit its parent's (H100: 9.0)."""
    mig = {
        "query": "nvidia-smi_query-gpu_csv_h100-mig_590.48.01.txt",
        "listing": "nvidia-smi-L_h100-80gb-mig_590.48.01.txt",
    }

    def gpu(**raw: Any) -> Mutation:
        return lambda _spec, values: values.update(gpu_values(**raw))

    ampere_only = _both(gpu(**mig), _set(ContainerTorch, "train", "arch_list", value=["sm_80"]))
    (finding,) = [f for f in run(ampere_only) if f.id.startswith("compat.")]
    assert (finding.id, finding.severity, finding.expected) == (
        "compat.torch_arch",
        "error",
        "sm_90",
    )
    assert "capability 9.0 (Hopper)" in finding.message
    # MIG on but no slice created: no device a job could get, so no arch to judge.
    gpu_line = read_fixture(mig["listing"]).splitlines()[0]
    no_slices = _both(ampere_only, gpu(**{**mig, "listing": gpu_line}))
    assert [f.id for f in run(no_slices) if f.id.startswith("compat.")] == []


def test_the_same_compat_rule_on_two_containers_is_two_findings_one_each() -> None:
    def twins(spec: dict[str, Any], values: dict[type, Any]) -> None:
        spec["containers"]["eval"] = spec["containers"]["train"]
        values[ContainerInspect]["eval"] = values[ContainerInspect]["train"]
        torch = {**values[ContainerTorch]["train"], "cuda": "13.9"}
        values[ContainerTorch] = {"train": torch, "eval": torch}

    found = [f for f in run(twins) if f.id == "compat.driver_cuda"]
    assert sorted(f.subject for f in found) == ["container eval", "container train"]


def test_shm_size_is_judged_against_the_host_memory_not_its_dev_shm() -> None:
    """`--shm-size` gives each container a tmpfs of its own: a host /dev/shm of 64 MiB is no
    finding (gpurig does not even read it); a declared size above the host's memory is."""
    assert "shm.size" not in {f.id for f in run()}
    [finding] = [f for f in run(SMALL_HOST) if f.id == "shm.size"]
    assert (finding.severity, finding.subject) == ("warn", "container train")
    assert (finding.expected, finding.actual) == ("<= 512 MiB (the host's memory)", "1 GiB")
    unknown = _set(HostMemory, "total_bytes", value=None)
    assert "shm.size" not in {f.id for f in run(unknown)}
