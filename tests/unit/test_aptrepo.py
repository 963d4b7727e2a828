"""The sandbox's stand-in apt repository, built here: signed so `gpgv` and apt accept it,
readable by apt through a throwaway apt root, and pinnable the way the deploy pins it."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
from gpu_fixtures import read_fixture

from gpurig.deploys.toolkit import check_fingerprint
from gpurig.plans import driver
from gpurig.plans.toolkit import packages, preferences
from gpurig.sandbox import aptrepo
from gpurig.sandbox.proc import wait_port

pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in (*aptrepo.TOOLS, "gpgv", "apt-get")),
    reason="needs dpkg-deb, gnupg, gpgv and apt-get (Debian)",
)
PACKAGES = packages()
OLD, NEW = aptrepo.VERSIONS


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return aptrepo.build(tmp_path_factory.mktemp("aptrepo"))


@pytest.fixture(scope="module")
def keyring(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The exported key dearmored, as the deploy does on a host."""
    path = tmp_path_factory.mktemp("keyring") / "key.gpg"
    armored = (repo / "gpgkey").read_bytes()
    path.write_bytes(subprocess.run(["gpg", "--dearmor"], input=armored, capture_output=True,
                                    check=True).stdout)  # fmt: skip
    return path


@pytest.fixture(scope="module")
def url(repo: Path) -> Iterator[str]:
    """The repository over HTTP on loopback only."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "gpurig.sandbox.listen", "127.0.0.1", str(port), "http", str(repo)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert wait_port("127.0.0.1", port, timeout=10), "the repository's server did not answer"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


class AptRoot:
    """apt-get and apt-cache confined to a directory: its own sources, lists and dpkg status."""

    def __init__(self, top: Path, source: str) -> None:
        for d in ("etc/apt/preferences.d", "etc/apt/sources.list.d", "var/lib/apt/lists/partial",
                  "var/cache/apt/archives/partial", "var/lib/dpkg"):  # fmt: skip
            (top / d).mkdir(parents=True, exist_ok=True)
        (top / "var/lib/dpkg/status").touch()
        (top / "etc/apt/sources.list").write_text(source)
        self.top = top
        self.options = ["-o", f"Dir={top}", "-o", f"Dir::State::status={top}/var/lib/dpkg/status",
                        "-o", "Debug::NoLocking=1"]  # fmt: skip

    def run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([tool, *self.options, *args], capture_output=True, text=True)


@pytest.fixture
def apt(tmp_path: Path, keyring: Path, url: str) -> AptRoot:
    root = AptRoot(tmp_path / "root", f"deb [signed-by={keyring}] {url} /\n")
    update = root.run("apt-get", "-o", "APT::Update::Error-Mode=any", "update")
    assert update.returncode == 0, update.stdout + update.stderr
    return root


def test_release_is_signed_by_the_exported_key(repo: Path, keyring: Path):
    for args in (["InRelease"], ["Release.gpg", "Release"]):
        proc = subprocess.run(["gpgv", "--keyring", str(keyring), *[str(repo / a) for a in args]],
                              capture_output=True, text=True)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    assert (repo / "gpgkey").read_text().startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")


def test_flat_layout_like_nvidia(repo: Path):
    assert {p.name for p in repo.iterdir()} == {
        "InRelease", "Release", "Release.gpg", "Packages", "gpgkey", "pool", "docker",
    }  # fmt: skip
    driver = len(aptrepo.DRIVER_PACKAGES) * len(aptrepo.DRIVER_VERSIONS)
    toolkit = len(PACKAGES) * len(aptrepo.VERSIONS)
    assert len(list((repo / "pool").glob("*.deb"))) == toolkit + driver


def test_built_once(repo: Path):
    before = (repo / "InRelease").stat().st_mtime_ns
    assert aptrepo.build(repo.parent) == repo
    assert (repo / "InRelease").stat().st_mtime_ns == before


def test_apt_sees_both_versions_and_prefers_the_newest(apt: AptRoot):
    for name in PACKAGES:
        policy = apt.run("apt-cache", "policy", name).stdout
        assert f"Candidate: {NEW}" in policy and OLD in policy, policy


def test_an_unpinned_old_toolkit_cannot_be_installed_alone(apt: AptRoot):
    # Its dependencies are satisfied by the newest versions: like the real packages, only a
    # pin on all four (or naming all four) installs one version.
    proc = apt.run("apt-get", "-s", "install", f"nvidia-container-toolkit={OLD}")
    assert proc.returncode != 0


def test_the_deploys_pin_installs_one_version(apt: AptRoot):
    (apt.top / "etc/apt/preferences.d/nvidia").write_text(preferences(PACKAGES, OLD))
    proc = apt.run("apt-get", "-s", "install", *(f"{name}={OLD}" for name in PACKAGES))
    assert proc.returncode == 0, proc.stderr
    installs = dict(re.findall(r"^Inst (\S+) \((\S+)", proc.stdout, re.M))
    assert installs == dict.fromkeys(PACKAGES, OLD)
    proc = apt.run("apt-get", "-s", "install", "nvidia-container-toolkit")
    assert dict(re.findall(r"^Inst (\S+) \((\S+)", proc.stdout, re.M)) == installs


def test_stand_in_nvidia_ctk_prints_the_real_version_format(repo: Path, tmp_path: Path):
    deb = repo / "pool" / f"nvidia-container-toolkit-base_{OLD}_all.deb"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path)], check=True)
    ours = subprocess.run([str(tmp_path / "usr/bin/nvidia-ctk"), "--version"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    shape = re.compile(r"NVIDIA Container Toolkit CLI version (\S+)\ncommit: \S+\n")
    assert shape.fullmatch(read_fixture("nvidia-ctk_version_1.12.0.txt"))
    assert shape.fullmatch(ours)[1] == OLD.rsplit("-", 1)[0]


def test_stand_in_driver_packages_are_what_the_driver_concern_holds_and_judges(apt: AptRoot):
    for name in aptrepo.DRIVER_PACKAGES:
        assert any(fnmatchcase(name, glob) for glob in driver.globs())
        assert driver.installed({name: {"version": "1", "held": False}})
        policy = apt.run("apt-cache", "policy", name).stdout
        assert all(v in policy for v in aptrepo.DRIVER_VERSIONS), policy
    old = aptrepo.DRIVER_VERSIONS[0]
    proc = apt.run("apt-get", "-s", "install", *(f"{p}={old}" for p in aptrepo.DRIVER_PACKAGES))
    assert re.findall(r"^Inst (\S+) \((\S+)", proc.stdout, re.M) == [
        ("libnvidia-compute-580", old), ("nvidia-driver-580", old)
    ]  # fmt: skip


def test_stand_in_compose_plugin_answers_the_docker_cli(repo: Path):
    for version in aptrepo.COMPOSE_VERSIONS:
        plugin = str(repo / aptrepo.compose_path(version))
        meta = subprocess.run([plugin, "docker-cli-plugin-metadata"], capture_output=True,
                              text=True, check=True).stdout  # fmt: skip
        assert json.loads(meta)["Version"] == f"v{version}"
        out = subprocess.run([plugin, "compose", "version"], capture_output=True, text=True,
                             check=True).stdout  # fmt: skip
        assert out == f"Docker Compose version v{version}\n"


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "another"])
def test_the_toolkit_key_is_installed_only_when_it_is_the_pinned_one(
    repo: Path, keyring: Path, tmp_path: Path, pinned: bool
):
    """Over plain HTTP a key is trusted by its pinned fingerprint alone."""
    real = aptrepo.key_fingerprint(repo)
    fingerprint = real if pinned else "0" * 40
    check = check_fingerprint(str(keyring), fingerprint.lower(), "http://mirror.example/gpgkey")
    done = subprocess.run(["sh", "-c", f"tmp={tmp_path} && {check}"], capture_output=True,
                          text=True)  # fmt: skip
    assert (done.returncode == 0) == pinned, done.stderr
    if not pinned:
        assert done.stderr.strip() == (
            "gpurig: the key from http://mirror.example/gpgkey is not the one key_fingerprint "
            f"pins ({'0' * 40}); found: {real}"
        )
