"""No apt-get the converge runs removes a package: on a host with Docker Engine from Docker's
own packages (their control fields as docker/docker-ce-packaging writes them), installing
Debian's docker.io would remove docker-ce and containerd.io under running containers. Run with
the real apt-get against a throwaway apt root (its own sources, lists and dpkg status) whose
dpkg is /bin/false, so nothing here is ever installed or removed."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpurig.deploys import packages
from gpurig.plans.change import Change
from gpurig.sandbox.aptrepo import DOCKER_CE

pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("apt-get", "dpkg-deb")), reason="needs apt-get (Debian)"
)
# Debian's packages (their dependencies left out: apt's resolver weighs them, not the rule);
# Debian 12's podman-docker (Podman's docker CLI) conflicts with docker.io.
DEBIAN = {"docker.io": "", "tmux": "", "podman": "",
          "podman-docker": "Depends: podman\nConflicts: docker.io\n"}  # fmt: skip
FIELDS = {**DEBIAN, **DOCKER_CE}
# What a host has installed: Docker Engine from Docker's packages, or Podman's docker CLI.
HOSTS = {"docker-ce": ("docker-ce", "docker-ce-cli", "containerd.io"),
         "podman-docker": ("podman", "podman-docker")}  # fmt: skip


def control(name: str, fields: str) -> str:
    return (f"Package: {name}\nVersion: 5:1.0\nArchitecture: all\nMaintainer: t <t@t.invalid>\n"
            f"{fields}Description: stand-in\n")  # fmt: skip


@pytest.fixture(params=list(HOSTS))
def apt_config(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """An apt root serving every stand-in from a local repository, one host's installed."""
    repo, top = tmp_path / "repo", tmp_path / "root"
    index = ""
    for name, fields in FIELDS.items():
        root = tmp_path / "build" / name
        (root / "DEBIAN").mkdir(parents=True)
        (root / "DEBIAN/control").write_text(control(name, fields))
        deb = repo / f"{name}_1.0_all.deb"
        repo.mkdir(exist_ok=True)
        subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(deb)],
                       check=True, capture_output=True)  # fmt: skip
        data = deb.read_bytes()
        index += (f"{control(name, fields)}Filename: ./{deb.name}\nSize: {len(data)}\n"
                  f"SHA256: {hashlib.sha256(data).hexdigest()}\n\n")  # fmt: skip
    (repo / "Packages").write_text(index)
    for d in (
        "etc/apt/apt.conf.d",
        "etc/apt/preferences.d",
        "etc/apt/sources.list.d",
        "var/lib/apt/lists/partial",
        "var/cache/apt/archives/partial",
        "var/lib/dpkg",
    ):
        (top / d).mkdir(parents=True, exist_ok=True)  # fmt: skip
    (top / "etc/apt/sources.list").write_text(f"deb [trusted=yes] file:{repo} ./\n")
    status = "".join(
        control(n, FIELDS[n]).replace("Version:", "Status: install ok installed\nVersion:") + "\n"
        for n in HOSTS[request.param]
    )
    (top / "var/lib/dpkg/status").write_text(status)
    config = tmp_path / "apt.conf"
    config.write_text(f'Dir "{top}/";\nDir::State::status "{top}/var/lib/dpkg/status";\n'
                      'Debug::NoLocking "1";\nAPT::Sandbox::User "root";\n'
                      'Dir::Bin::dpkg "/bin/false";\n')  # fmt: skip
    return config


def run_install(config: Path, names: list[str]) -> subprocess.CompletedProcess[str]:
    change = Change("packages.missing", "packages", "installed", "not installed", "install",
                    data={"packages": names})  # fmt: skip
    env = {**os.environ, "APT_CONFIG": str(config)}
    return subprocess.run(["sh", "-c", packages.install(change)], capture_output=True,
                          text=True, env=env)  # fmt: skip


def test_installing_what_conflicts_with_the_engine_is_refused_naming_it(
    apt_config: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(packages, "lock_wait", lambda: 5)
    done = run_install(apt_config, ["docker.io"])
    assert done.returncode != 0
    status = (apt_config.parent / "root/var/lib/dpkg/status").read_text()
    removed = "podman-docker" if "podman-docker" in status else "docker-ce docker-ce-cli"
    assert (
        f"gpurig: refused: apt would remove these packages to install docker.io: {removed} "
        "(they conflict). gpurig never removes a package"
    ) in done.stderr
    # apt stopped before dpkg: had it called dpkg (/bin/false here), it would say so.
    assert "/bin/false" not in done.stderr and "Sub-process" not in done.stderr


def test_an_install_that_removes_nothing_goes_to_dpkg(
    apt_config: Path, monkeypatch: pytest.MonkeyPatch
):
    """The same command with nothing in the way reaches dpkg (/bin/false here, so it fails
    there): --no-remove refuses only removals."""
    monkeypatch.setattr(packages, "lock_wait", lambda: 5)
    done = run_install(apt_config, ["tmux"])
    assert "remove is disabled" not in done.stderr and "gpurig: refused" not in done.stderr
    assert "Sub-process /bin/false returned an error code" in done.stderr
