"""The NVIDIA container toolkit deploy against the sandbox's stand-in apt repository: real
key download and dearmoring, real apt pin, install and hold, the runtime in a real Docker's
daemon.json. No GPU here: CDI generation and GPUs inside containers are checked only on GPU
machines. Uses full-2 (Docker) and full-3 (Podman) after test_converge.py has converged them
(file order): their engines are installed already, and this spec keeps their settings."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
import testinfra
from support import Sandbox, write_inventory

from gpurig.plans.toolkit import CDI_SPEC, KEYRING, SOURCES_LIST, packages, sources_list
from gpurig.remote.converge import converge
from gpurig.sandbox import aptrepo

DOCKER, PODMAN = "full-2", "full-3"
OLD, NEW = aptrepo.VERSIONS
PACKAGES = packages()
FOREIGN = {"log-level": "warn"}


def spec(box: Sandbox, engine: str, gpu: str = "auto") -> dict:
    """The toolkit at OLD from `box`'s apt repository."""
    extra = {"podman_socket": True} if engine == "podman" else {}
    return {"engine": engine, "gpu": gpu, "insecure_registries": [box.registry],
            "nvidia_toolkit": box.toolkit(OLD), **extra}  # fmt: skip


def remote(sandbox: Sandbox, name: str) -> testinfra.host.Host:
    return testinfra.get_host(f"ssh://{name}", ssh_config=str(sandbox.paths.ssh_config))


@pytest.fixture(scope="module")
def converged(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Path:
    daemon = json.dumps({**FOREIGN, "insecure-registries": [sandbox.registry]})
    remote(sandbox, DOCKER).check_output(f"printf '%s' '{daemon}' > /etc/docker/daemon.json")
    inventory = write_inventory(
        sandbox,
        tmp_path_factory.mktemp("toolkit") / "inventory.yaml",
        {DOCKER: spec(sandbox, "docker"), PODMAN: spec(sandbox, "podman")},
    )
    first = converge([inventory], limit=[DOCKER, PODMAN])
    assert first.returncode == 0, first.stderr
    installed = first.changed[f"NVIDIA container toolkit | Install and hold the toolkit at {OLD}"]
    assert set(installed) == {DOCKER, PODMAN}
    assert first.changed["Container engine | Configure /etc/docker/daemon.json"] == [DOCKER]
    return inventory


def test_keyring_is_the_served_key_dearmored(sandbox: Sandbox, converged: Path):
    armored = (sandbox.top / "aptrepo" / "repo" / "gpgkey").read_bytes()
    dearmored = subprocess.run(["gpg", "--dearmor"], input=armored, capture_output=True,
                               check=True).stdout  # fmt: skip
    for name in (DOCKER, PODMAN):
        shell = remote(sandbox, name)
        assert shell.file(KEYRING).sha256sum == hashlib.sha256(dearmored).hexdigest()
        assert shell.file(SOURCES_LIST).content_string == sources_list(sandbox.apt_url)


def test_packages_at_the_pinned_version_although_a_newer_one_exists(
    sandbox: Sandbox, converged: Path
):
    for name in (DOCKER, PODMAN):
        shell = remote(sandbox, name)
        versions = shell.check_output(
            "dpkg-query -W -f='${Package} ${Version}\\n' " + " ".join(PACKAGES)
        )
        assert dict(line.split() for line in versions.splitlines()) == dict.fromkeys(PACKAGES, OLD)
        assert NEW in shell.check_output("apt-cache policy nvidia-container-toolkit")
        assert set(PACKAGES) <= set(shell.check_output("apt-mark showhold").split())
        version = shell.check_output("nvidia-ctk --version").splitlines()[0]
        assert version == f"NVIDIA Container Toolkit CLI version {OLD.rsplit('-', 1)[0]}"


def test_docker_has_the_nvidia_runtime_and_keeps_foreign_keys(sandbox: Sandbox, converged: Path):
    shell = remote(sandbox, DOCKER)
    config = json.loads(shell.file("/etc/docker/daemon.json").content_string)
    assert config == {
        **FOREIGN,
        "insecure-registries": [sandbox.registry],
        "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}},
    }
    # docker was restarted: the running daemon knows the runtime.
    assert "nvidia" in json.loads(shell.check_output("docker info --format '{{json .Runtimes}}'"))


def test_podman_without_gpu_gets_no_cdi_spec(sandbox: Sandbox, converged: Path):
    assert not remote(sandbox, PODMAN).file(CDI_SPEC).exists


def test_second_converge_changes_nothing(converged: Path):
    again = converge([converged], limit=[DOCKER, PODMAN])
    assert again.returncode == 0, again.stderr
    assert again.change_count == 0, again.changed


def test_gpu_required_without_a_gpu_is_refused(sandbox: Sandbox, tmp_path: Path):
    inventory = write_inventory(
        sandbox, tmp_path / "inv.yaml", {DOCKER: spec(sandbox, "docker", "required")}
    )
    result = converge([inventory], limit=[DOCKER])
    assert result.returncode != 0
    assert "gpu: required" in result.stderr and "until a GPU answers" in result.stderr
