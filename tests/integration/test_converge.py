"""Converge bare full hosts with Docker and with Podman: real apt, real engines, a training
container pulled by digest from the sandbox registry; then drift and the safety rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import Sandbox, gpurig, host_spec, remote, run_verify, write_inventory

from gpurig.converge import converge

DOCKER, PODMAN = "full-2", "full-3"


@pytest.fixture(scope="module")
def converged(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Path:
    image = sandbox.state.images["train"]
    for name in (DOCKER, PODMAN):
        remote(sandbox, name).check_output("mkdir -p /srv/data")
    inventory = write_inventory(
        sandbox,
        tmp_path_factory.mktemp("converge") / "inventory.yaml",
        {DOCKER: host_spec("docker", image), PODMAN: host_spec("podman", image)},
    )
    first = converge([inventory], limit=[DOCKER, PODMAN])
    assert first.returncode == 0, first.stderr
    assert set(first.changed["Containers | Container train"]) == {DOCKER, PODMAN}
    return inventory


def inspect(sandbox: Sandbox, name: str) -> dict:
    engine = "docker" if name == DOCKER else "podman"
    out = remote(sandbox, name).check_output(f"{engine} container inspect train")
    return json.loads(out)[0]


def test_second_converge_changes_nothing(converged: Path):
    again = converge([converged], limit=[DOCKER, PODMAN])
    assert again.returncode == 0, again.stderr
    assert again.change_count == 0, again.changed


def test_verify_suite_passes_on_both_engines(sandbox: Sandbox, converged: Path):
    verify = run_verify(sandbox, [DOCKER, PODMAN], inventory=converged)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    # core dumps (2) + engine runs + daemon.json or socket + containers, on each host
    assert "10 passed" in verify.stdout, verify.stdout


def test_container_has_the_declared_settings_and_defaults(sandbox: Sandbox, converged: Path):
    for name in (DOCKER, PODMAN):
        info = inspect(sandbox, name)
        assert info["HostConfig"]["ShmSize"] == 8 << 30
        assert info["Config"]["User"] == "root"
        assert info["HostConfig"]["NetworkMode"] == "host"
        assert sandbox.state.images["train"].split("@")[1] in json.dumps(info)
        env = dict(item.split("=", 1) for item in info["Config"]["Env"])
        assert env["PYTHONUNBUFFERED"] == "1"
        assert int(env["OMP_NUM_THREADS"]) >= 1
        assert info["HostConfig"]["RestartPolicy"]["MaximumRetryCount"] == 5
        shell = remote(sandbox, name)
        engine = "docker" if name == DOCKER else "podman"
        assert shell.check_output(f"{engine} exec train sh -c 'ulimit -c'") == "0"
        assert shell.check_output("bash -lc 'ulimit -c'") == "0"


def test_drift_is_clean_after_converge(sandbox: Sandbox, converged: Path):
    proc = gpurig("drift", str(converged), "--limit", DOCKER, "--limit", PODMAN, "--format", "json")
    report = json.loads(proc.stdout)
    assert [h["name"] for h in report["hosts"]] == [DOCKER, PODMAN]
    errors = [f for h in report["hosts"] for f in h["findings"] if f["severity"] == "error"]
    assert proc.returncode == 0, errors
    assert all(h["reachable"] for h in report["hosts"])


def test_foreign_daemon_json_key_survives(sandbox: Sandbox, converged: Path):
    shell = remote(sandbox, DOCKER)
    shell.check_output(
        "printf '%s' '{\"log-level\": \"warn\"}' > /etc/docker/daemon.json"
    )  # gpurig's key removed, a foreign one added
    result = converge([converged], limit=[DOCKER])
    assert result.returncode == 0, result.stderr
    config = json.loads(shell.file("/etc/docker/daemon.json").content_string)
    assert config == {"log-level": "warn", "insecure-registries": [sandbox.registry]}
    assert "Container engine | Configure /etc/docker/daemon.json" in result.changed


def test_running_container_with_drift_is_refused_then_stopped_one_is_recreated(
    sandbox: Sandbox, converged: Path
):
    shell = remote(sandbox, PODMAN)
    image = sandbox.state.images["train"]
    # conmon keeps the session's stdout open: detach it, or ssh waits for it forever.
    shell.check_output(
        f"podman rm -f train && podman run -d --name train --shm-size 64m {image} "
        "sleep infinity >/dev/null 2>&1 </dev/null"
    )
    refused = converge([converged], limit=[PODMAN])
    assert refused.returncode != 0
    assert "shm_size" in refused.stderr and "allow_recreate" in refused.stderr
    assert inspect(sandbox, PODMAN)["HostConfig"]["ShmSize"] == 64 << 20  # left alone

    shell.check_output("podman stop -t 0 train")
    recreated = converge([converged], limit=[PODMAN])
    assert recreated.returncode == 0, recreated.stderr
    info = inspect(sandbox, PODMAN)
    assert info["HostConfig"]["ShmSize"] == 8 << 30 and info["State"]["Running"]


def test_running_container_is_recreated_with_the_opt_in(sandbox: Sandbox, converged: Path):
    shell = remote(sandbox, DOCKER)
    image = sandbox.state.images["train"]
    shell.check_output(
        f"docker rm -f train && docker run -d --name train --shm-size 64m {image} sleep infinity"
    )
    result = converge([converged], limit=[DOCKER], data={"allow_recreate": "true"})
    assert result.returncode == 0, result.stderr
    assert result.changed["Containers | Container train"] == [DOCKER]
    assert inspect(sandbox, DOCKER)["HostConfig"]["ShmSize"] == 8 << 30


def test_engine_on_a_host_without_systemd_is_refused(sandbox: Sandbox, tmp_path: Path):
    inventory = write_inventory(sandbox, tmp_path / "inv.yaml", {"fleet-003": {"engine": "docker"}})
    result = converge([inventory], limit=["fleet-003"])
    assert result.returncode != 0
    assert "a pod should use engine: none" in result.stderr
