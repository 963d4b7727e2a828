"""A host running Docker Engine from Docker's own packages (docker-ce, docker-ce-cli,
containerd.io; stand-ins repacked from Debian's docker.io, containerd and runc with Docker's
control fields, so the engine is real, served by the sandbox's apt repository), with a
container running under it: `engine: docker` is that engine, a package it provides is
installed, and no converge removes it, not even one that names docker.io: the container runs
on, untouched."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from support import FULL, Sandbox, remote, write_inventory

from gpurig.remote.converge import converge
from gpurig.sandbox.aptrepo import DOCKER_CE, publish_docker_ce

pytestmark = pytest.mark.late  # a host of its own, kept by later ups
HOST = f"full-{FULL + 1}"


def dpkg_installed(sandbox: Sandbox, names: list[str]) -> dict[str, bool]:
    out = (
        remote(sandbox, HOST)
        .run("dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' " + " ".join(names))
        .stdout
    )
    rows = dict(line.split(" ", 1) for line in out.splitlines())
    return {n: rows.get(n, "").startswith("ii") for n in names}


def container(sandbox: Sandbox) -> dict:
    out = remote(sandbox, HOST).check_output("docker container inspect keep")
    state = json.loads(out)[0]
    return {"id": state["Id"], "running": state["State"]["Running"],
            "started": state["State"]["StartedAt"]}  # fmt: skip


@pytest.fixture(scope="module")
def docker_ce(sandbox: Sandbox) -> dict:
    """Docker's packages installed from their repository, as Docker's install guide does (the
    registry trusted in daemon.json first), dockerd running, and a container `keep` running
    under it."""
    assert sandbox.up(full=FULL + 1).returncode == 0
    where = publish_docker_ce(sandbox.top / "aptrepo")
    source = f"deb [trusted=yes] {sandbox.apt_url}/{where} /"
    host = remote(sandbox, HOST)
    daemon = json.dumps({"insecure-registries": [sandbox.registry]})
    host.check_output(
        f"mkdir -p /etc/docker && printf '%s' {shlex.quote(daemon)} > /etc/docker/daemon.json && "
        f"echo {shlex.quote(source)} > /etc/apt/sources.list.d/docker.list && "
        "apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
        f"--no-install-recommends {' '.join(DOCKER_CE)} >/dev/null 2>&1 && "
        "systemctl is-active docker"
    )
    assert dpkg_installed(sandbox, [*DOCKER_CE, "docker.io"]) == {
        **dict.fromkeys(DOCKER_CE, True), "docker.io": False,
    }  # fmt: skip
    image = sandbox.state.images["train"]
    host.check_output(
        "docker run -d --name keep --network host --ulimit nofile=1024:20000 "
        f"--ulimit nproc=4096:4096 {image} sleep infinity >/dev/null"
    )
    before = container(sandbox)
    assert before["running"]
    return before


def spec(sandbox: Sandbox, packages: list[str]) -> dict:
    return {"engine": "docker", "insecure_registries": [sandbox.registry], "packages": packages}


def test_dockers_own_engine_is_the_engine_and_stays(
    sandbox: Sandbox, docker_ce: dict, tmp_path: Path
):
    # runc: containerd.io provides it (and conflicts with Debian's runc).
    inventory = write_inventory(sandbox, tmp_path / "inv.yaml", {HOST: spec(sandbox, ["runc"])})
    done = converge([inventory], limit=[HOST])
    assert done.returncode == 0, done.stderr
    touched = [op for op in done.changed if op.startswith(("Packages", "Container engine"))]
    assert touched == [], done.changed  # nothing installed, the engine left as it runs
    assert dpkg_installed(sandbox, [*DOCKER_CE, "docker.io", "runc"]) == {
        **dict.fromkeys(DOCKER_CE, True), "docker.io": False, "runc": False,
    }  # fmt: skip
    assert container(sandbox) == docker_ce


def test_an_install_that_would_remove_the_engine_is_refused_and_removes_nothing(
    sandbox: Sandbox, docker_ce: dict, tmp_path: Path
):
    asked = spec(sandbox, ["docker.io"])
    inventory = write_inventory(sandbox, tmp_path / "inv.yaml", {HOST: asked})
    done = converge([inventory], limit=[HOST])
    assert done.returncode != 0  # the only host failed: pyinfra writes no JSON then
    said = done.stderr + done.stdout
    # With Docker's packages in a repository apt reads (as on a real host), apt's resolver
    # gives up rather than propose removing them, and says which package conflicts; where it
    # would remove them (packages no source offers), gpurig's refusal names them
    # (tests/unit/test_apt_no_remove.py).
    assert "containerd.io : Conflicts: containerd" in said, said
    assert dpkg_installed(sandbox, [*DOCKER_CE, "docker.io"]) == {
        **dict.fromkeys(DOCKER_CE, True), "docker.io": False,
    }  # fmt: skip
    assert container(sandbox) == docker_ce
