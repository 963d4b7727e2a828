"""Converge bare full hosts with Docker and with Podman: real apt, real engines, a training
container pulled by digest from the sandbox registry; then drift and the safety rules."""

from __future__ import annotations

import json
import os
import secrets
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support import (
    REPO_ROOT,
    Sandbox,
    gpurig,
    host_spec,
    remote,
    run_verify,
    write_inventory,
)

from gpurig.remote.converge import converge

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


# Samples every process's command line on the host, every 10 ms, while the converge runs, and
# writes each one that holds the needle (read from a file: its own command line holds nothing).
SAMPLER = """\
import glob, time
needle = open("/root/.envfile-needle", "rb").read().strip()
seen = set()
with open("/root/.envfile-hits", "ab", buffering=0) as out:
    while True:
        for path in glob.glob("/proc/[0-9]*/cmdline"):
            try:
                with open(path, "rb") as f:
                    line = f.read().replace(b"\\0", b" ")
            except OSError:
                continue
            if needle in line and line not in seen:
                seen.add(line)
                out.write(line + b"\\n")
        time.sleep(0.01)
"""


def test_env_values_reach_the_container_through_a_file_and_no_command_line(
    sandbox: Sandbox, converged: Path, tmp_path: Path
):
    """A token in a container's env: inspect shows it (the engine's model), while no process
    on the host showed it in its command line during the converge, pyinfra's -vv log of the
    commands does not hold it, no file in /tmp holds it afterwards, and a second converge has
    nothing to do."""
    token = f"hf_{secrets.token_hex(16)}"
    env = {"HF_TOKEN": token, "NOTE": "a b 'c' \"d\" $HOME #e\tf=g"}
    inventory = yaml.safe_load(converged.read_text())
    for name in (DOCKER, PODMAN):
        spec = inventory["hosts"][name]["spec"]
        spec["containers"]["envfile"] = {**spec["containers"]["train"], "env": env}
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(inventory))
    samplers = {}
    for name in (DOCKER, PODMAN):
        shell = remote(sandbox, name)
        shell.check_output(
            f"umask 077 && printf '%s\\n' {token} > /root/.envfile-needle && "
            f"printf %s {shlex.quote(SAMPLER)} > /root/.envfile-sampler.py && "
            "rm -f /root/.envfile-hits"
        )
        samplers[name] = shell.check_output(
            "nohup timeout 600 python3 /root/.envfile-sampler.py >/dev/null 2>&1 </dev/null & "
            "echo $!"
        )
        # Control: the sampler sees a command line that holds the token.
        shell.check_output(f"sh -c 'sleep 1' control-{token}")
    try:
        run = subprocess.run(
            [sys.executable, "-m", "pyinfra", "-y", "-vv", "--limit", DOCKER, "--limit", PODMAN,
             "inventory.py", "deploys/gpu_host.py"], cwd=REPO_ROOT,
            env={**os.environ, "GPURIG_INVENTORY": str(path)}, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
    finally:
        for name, pid in samplers.items():
            remote(sandbox, name).run(f"kill {pid}")
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    for name in (DOCKER, PODMAN):
        shell = remote(sandbox, name)
        hits = shell.check_output("cat /root/.envfile-hits").splitlines()
        assert hits and all(f"control-{token}" in line for line in hits), hits
        engine = "docker" if name == DOCKER else "podman"
        info = json.loads(shell.check_output(f"{engine} container inspect envfile"))[0]
        assert {k: v for k, v in (i.split("=", 1) for i in info["Config"]["Env"])
                if k in env} == env  # fmt: skip
        left = shell.run("grep -rlF -f /root/.envfile-needle /tmp /var/tmp /home").stdout
        assert left == "", left
        assert shell.check_output("find /tmp -maxdepth 1 -name 'gpurig-*'") == ""
    assert "--env-file /tmp/gpurig-" in log and token not in log
    again = converge([path], limit=[DOCKER, PODMAN])
    assert again.returncode == 0 and again.change_count == 0, again.changed
    for name in (DOCKER, PODMAN):
        engine = "docker" if name == DOCKER else "podman"
        remote(sandbox, name).check_output(
            f"{engine} rm -f envfile >/dev/null; rm -f /root/.envfile-*"
        )
