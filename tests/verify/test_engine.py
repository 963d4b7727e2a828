"""The container engine and declared containers, seen from the host."""

import json

import pytest

from gpurig.plans.engine import DAEMON_JSON, PODMAN_SOCKET
from gpurig.spec.units import parse_size


def _engine(spec, undeclared):
    kind = spec.get("engine", "none")
    if kind == "none":
        undeclared("this host declares no engine")
    return kind


def test_engine_runs(host, spec, undeclared):
    kind = _engine(spec, undeclared)
    assert host.run(f"{kind} info").rc == 0


def test_podman_socket_answers_and_docker_host_is_exported(host, spec, undeclared):
    if _engine(spec, undeclared) != "podman" or not spec.get("podman_socket"):
        pytest.skip("no podman socket declared")
    assert host.socket(f"unix://{PODMAN_SOCKET}").is_listening
    ping = host.check_output(f"curl -s --unix-socket {PODMAN_SOCKET} http://d/_ping")
    assert ping == "OK"
    assert host.check_output("bash -lc 'echo $DOCKER_HOST'") == f"unix://{PODMAN_SOCKET}"


def test_docker_daemon_json_has_gpurig_keys(host, spec, undeclared):
    if _engine(spec, undeclared) != "docker":
        pytest.skip("not a docker host")
    config = json.loads(host.file(DAEMON_JSON).content_string)
    assert config.get("insecure-registries", []) == spec.get("insecure_registries", [])


def test_containers_match_their_spec(host, spec, undeclared):
    kind = _engine(spec, undeclared)
    if not spec.get("containers"):
        pytest.skip("no containers declared")
    for name, declared in spec["containers"].items():
        info = json.loads(host.check_output(f"{kind} container inspect {name}"))[0]
        assert info["State"]["Running"], name
        if "shm_size" in declared:
            assert info["HostConfig"]["ShmSize"] == parse_size(declared["shm_size"]), name
        assert host.check_output(f"{kind} exec {name} sh -c 'ulimit -c'") == "0", name
        env = host.check_output(f"{kind} exec {name} env")
        assert "PYTHONUNBUFFERED=1" in env.splitlines(), name
