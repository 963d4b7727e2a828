"""Every path of deploys/containers.declared_container, in pyinfra-testing's fixture style:
facts in, commands out. The inspect documents were recorded from real Docker and Podman engines on
sandbox hosts (tests/fixtures/engine/README.md); drift cases change one field of them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from pyinfra.api import OperationError
from pyinfra.context import ctx_host, ctx_state
from pyinfra_testing.operations import parse_commands
from pyinfra_testing.util import FakeState, create_host

from gpurig.deploys.containers import _create, declared_container
from gpurig.facts.gpurig_container import USER_SOCKET, ContainerInspect, CpuQuota
from gpurig.facts.gpurig_nvidia import NvidiaGpus
from gpurig.facts.gpurig_user import UserPodman
from gpurig.plans.containers import plan, usable_cpus
from gpurig.spec.model import normalise
from gpurig.spec.user_scope import CONTAINER_HOST

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "engine"


def recorded(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())[0]


def spec_of(inspect: dict[str, Any]) -> dict[str, Any]:
    """The spec the recorded container was converged from (tests/fixtures/engine/README.md)."""
    return {
        "image": inspect["Config"]["Image"] if "Config" in inspect else inspect["ImageName"],
        "shm_size": "512g",
        "user": "root",
        "network": "host",
        "command": ["sleep", "infinity"],
        "ulimits": {"nofile": "1024:20000", "nproc": "4096:4096"},
    }


def run(
    engine: str,
    inspect: dict[str, Any] | None,
    spec: dict[str, Any],
    cpus: int = 1,
    gpu_check: bool = False,
    allow_recreate: bool = False,
):
    facts = {
        "gpurig_container.ContainerInspect": {
            f"container=train, engine={engine}": {"inspect": inspect, "oom_kill": None}
        },
        "gpurig_container.CpuQuota": {"nproc": cpus, "cpus": None},
        "gpurig_nvidia.NvidiaGpus": {"smi": gpu_check, "present": gpu_check, "gpus": [],
                                     "driver": None, "error": None},
    }  # fmt: skip
    host_spec = normalise({"engine": engine, "containers": {"train": spec}})
    state = FakeState()
    host = create_host(state, facts=facts)
    with ctx_state.use(state), ctx_host.use(host):
        commands = parse_commands(
            list(
                declared_container._inner(
                    spec=host_spec, container="train", allow_recreate=allow_recreate
                )
            )
        )
    return commands, host.noop_description


def created(commands: list[Any]) -> tuple[str, str]:
    """(the run command, the env file's content) of a creation: the stage is made (0700, the
    file 0600), the environment uploaded into it, and the run reads it there and removes it."""
    make, upload, run_cmd = commands[-3:]
    [(data, dest)] = [upload["command"][1:]]
    stage = dest.removesuffix("/upload")
    assert upload == {"_sudo": False, "command": ["upload", data, f"{stage}/upload"]}
    # Made by the login that uploads into it, without sudo: root's own when root converges.
    assert make["_sudo"] is False
    assert f"mkdir -m 700 {stage} && (umask 077 && : > {stage}/upload)" in make["command"]
    assert f" --env-file {stage}/upload " in run_cmd
    assert run_cmd.endswith(f" >/dev/null; rc=$?; rm -rf {stage}; exit $rc")
    assert "--env " not in run_cmd
    return run_cmd, data


@pytest.fixture(params=["docker", "podman"])
def engine(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def inspect(engine: str) -> dict[str, Any]:
    return recorded(f"{engine}-inspect-train.json")


def test_converged_running_container_is_a_noop(engine: str, inspect: dict[str, Any]):
    commands, noop = run(engine, inspect, spec_of(inspect), cpus=2)
    assert commands == []
    assert noop == "container train matches its spec and is running"


def test_absent_container_is_pulled_by_digest_and_run_with_defaults(engine, inspect):
    spec = spec_of(inspect)
    commands, _ = run(engine, None, spec, cpus=2)
    assert commands[0] == f"{engine} pull {spec['image']} >/dev/null"
    assert len(commands) == 4  # no GPU check without gpu_check
    run_cmd, env = created(commands)
    assert run_cmd.startswith(f"{engine} run --detach --name train --env-file /tmp/gpurig-")
    assert " --shm-size 549755813888 " in run_cmd
    defaults = ["--ulimit core=0:0", "--restart on-failure:5"]
    for part in ["--user root", "--network host", "--ulimit nofile=1024:20000", *defaults]:
        assert part in run_cmd
    assert run_cmd.split(" >/dev/null;")[0].endswith(f"{spec['image']} sleep infinity")
    assert env == "PYTHONUNBUFFERED=1\n"


def test_env_values_reach_the_host_only_in_the_upload(engine, inspect):
    """A token in the environment is in no command gpurig sends (`ps` would show it to every
    account on the host), only in the env file's upload, one KEY=value a line, as it is."""
    token = "hf_Zq3xT0k8eXaMpLe4uH9wQ2"
    spec = {**spec_of(inspect), "env": {"HF_TOKEN": token, "URL": "a b='c' $HOME"}}
    commands, _ = run(engine, None, spec)
    _, env = created(commands)
    assert env == f"HF_TOKEN={token}\nPYTHONUNBUFFERED=1\nURL=a b='c' $HOME\n"
    assert not [c for c in commands if isinstance(c, str) and token in c]


def test_user_scope_runs_through_the_users_socket_with_the_env_file(inspect):
    host_spec = normalise({"scope": "user", "engine": "podman",
                           "containers": {"train": spec_of(inspect)}})  # fmt: skip
    reads = {CpuQuota: {"nproc": 1, "cpus": None}, NvidiaGpus: {"smi": False},
             USER_SOCKET[ContainerInspect]: {"inspect": None},
             UserPodman: {"answers": True}}  # fmt: skip
    [change] = plan(host_spec, lambda fact, **kwargs: reads[fact])
    commands = parse_commands(list(_create(dict(change.data), remove=False)))
    run_cmd, _ = created(commands)
    assert run_cmd.startswith(f"{CONTAINER_HOST} podman run --detach --name train --env-file ")


def test_stopped_container_without_drift_is_started(engine, inspect):
    stopped = copy.deepcopy(inspect)
    stopped["State"]["Running"] = False
    commands, _ = run(engine, stopped, spec_of(inspect))
    assert commands == [f"{engine} start train >/dev/null"]


def test_running_container_with_drift_is_refused_naming_each_field(engine, inspect):
    spec = {**spec_of(inspect), "shm_size": "64g", "user": "1000"}
    with pytest.raises(OperationError) as info:
        run(engine, inspect, spec)
    message = str(info.value)
    assert "container train shm_size: expected 64 GiB, found 512 GiB" in message
    assert "container train user: expected 1000, found root" in message
    assert message.count("gpurig does not recreate the running train: stop its job first") == 1
    assert "--data allow_recreate=true" in message


def test_running_container_with_drift_is_recreated_with_the_opt_in(engine, inspect):
    spec = {**spec_of(inspect), "shm_size": "64g"}
    commands, _ = run(engine, inspect, spec, allow_recreate=True)
    assert commands[0] == f"{engine} rm --force train"
    assert "--shm-size 68719476736" in created(commands)[0]


def test_recreate_always_recreates_a_running_container(engine, inspect):
    spec = {**spec_of(inspect), "network": "bridge", "recreate": "always"}
    commands, _ = run(engine, inspect, spec)
    assert commands[0] == f"{engine} rm --force train"
    assert "--network bridge" in created(commands)[0]


def test_stopped_container_with_drift_is_recreated(engine, inspect):
    stopped = copy.deepcopy(inspect)
    stopped["State"]["Running"] = False
    spec = {**spec_of(inspect), "env": {"WANDB_MODE": "offline"}}
    commands, _ = run(engine, stopped, spec)
    assert commands[0] == f"{engine} rm --force train"
    assert "WANDB_MODE=offline\n" in created(commands)[1]


def test_recreate_never_refuses_even_a_stopped_container(engine, inspect):
    stopped = copy.deepcopy(inspect)
    stopped["State"]["Running"] = False
    spec = {**spec_of(inspect), "shm_size": "1g", "recreate": "never"}
    with pytest.raises(
        OperationError, match=r"does not recreate train \(stopped, recreate: never\)"
    ):
        run(engine, stopped, spec)


def test_omp_threads_auto_follows_the_cpu_quota(engine, inspect):
    spec = {**spec_of(inspect), "omp_num_threads": "auto"}
    commands, _ = run(engine, None, spec, cpus=12)
    assert "OMP_NUM_THREADS=12\n" in created(commands)[1]


def test_gpu_container_gets_the_engine_specific_request_and_a_visibility_check(engine, inspect):
    spec = {**spec_of(inspect), "gpus": "all"}
    commands, _ = run(engine, None, spec, gpu_check=True)
    wanted = "--gpus all" if engine == "docker" else "--device nvidia.com/gpu=all"
    assert wanted in created(commands[:-1])[0]
    assert commands[-1] == (
        f"{engine} exec train nvidia-smi -L >/dev/null || "
        "{ echo 'gpurig: GPU not visible inside container train (nvidia-smi failed)' >&2; exit 1; }"
    )


def test_gpu_indices_become_device_requests(engine, inspect):
    spec = {**spec_of(inspect), "gpus": [0, 2]}
    commands, _ = run(engine, None, spec)
    run_cmd = created(commands)[0]
    if engine == "docker":
        assert "--gpus '\"device=0,2\"'" in run_cmd
    else:
        assert "--device nvidia.com/gpu=0 --device nvidia.com/gpu=2" in run_cmd


def test_docker_gpu_container_recorded_with_device_requests_is_not_drift():
    inspect = recorded("docker-inspect-train-gpus-all.json")
    spec = {**spec_of(inspect), "gpus": "all"}
    stopped = copy.deepcopy(inspect)  # recorded as created: no GPU here to start it
    commands, _ = run("docker", stopped, spec)
    assert commands == ["docker start train >/dev/null"]


@pytest.mark.parametrize(
    ("nproc", "quota", "usable"),
    [("16", "", 16), ("16", "max 100000", 16), ("16", "150000 100000", 2),
     ("16", "-1 100000", 16), ("4", "800000 100000", 8), ("", "", 1)],
)  # fmt: skip
def test_omp_auto_counts_the_cgroup_quota_rounded_up(nproc: str, quota: str, usable: int):
    """CpuQuota parses cpu.max (or v1's quota and period) once; a job gets whole CPUs."""
    assert usable_cpus(CpuQuota.parse({"nproc": nproc, "quota": quota})) == usable
