"""gpurig's parsers fed what each Debian release's own tools print (tests/fixtures/release,
recorded in minimal chroots of Debian 11, 12 and 13: its README says how)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from gpurig.deploys import packages
from gpurig.facts.gpurig_node import EngineVersions
from gpurig.facts.gpurig_packages import DebStatus, DriverPackages, OsRelease
from gpurig.onboard.onboard import os_problem
from tests.unit.gpu_fixtures import recorded_output

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "release"


def header(name: str) -> dict[str, str]:
    """The fixture's `# key: value` header lines."""
    found = {}
    for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines():
        if not line.startswith("# "):
            break
        key, _, value = line[2:].partition(": ")
        found[key] = value
    return found


def body(name: str) -> str:
    """The recorded output, without its header."""
    return recorded_output(FIXTURES / name)


@pytest.mark.parametrize(("release", "codename"), [("11", "bullseye"), ("13", "trixie")])
def test_os_release_is_read_and_accepted(release: str, codename: str) -> None:
    found = OsRelease.parse({"os": body(f"os-release_debian-{release}.txt")})
    assert found["os_id"] == "debian" and found["os_version"] == release
    assert found["os_pretty"] == f"Debian GNU/Linux {release} ({codename})"
    assert os_problem(found["os_id"], found["os_version"]) is None


@pytest.mark.parametrize(
    ("name", "tool", "line"),
    [("podman--version_debian-11_3.0.1.txt", "podman", "podman version 3.0.1"),
     ("podman--version_debian-13_5.4.2.txt", "podman", "podman version 5.4.2"),
     ("docker--version_debian-11_20.10.5.txt", "docker",
      "Docker version 20.10.5+dfsg1, build 55c4c88"),
     ("docker--version_debian-13_docker-cli_26.1.5.txt", "docker",
      "Docker version 26.1.5+dfsg1, build a72d7cd"),
     # Debian 13's docker.io without its recommended docker-cli has no docker command.
     ("docker--version_debian-13_docker.io-without-recommends.txt", "docker", None)],
)  # fmt: skip
def test_engine_versions(name: str, tool: str, line: str | None) -> None:
    assert header(name)["command"] == f"{tool} --version 2>/dev/null | sed -n 1p"
    assert EngineVersions.parse({tool: body(name)})[tool] == line


@pytest.mark.parametrize(
    ("release", "podman", "docker", "tmux_known"),
    [("11", "3.0.1+dfsg1-3+deb11u5", "20.10.5+dfsg1-1+deb11u2", False),
     ("13", "5.4.2+ds1-2+b2", "26.1.5+dfsg1-9+deb13u1+b1", True)],
)  # fmt: skip
def test_debstatus(release: str, podman: str, docker: str, tmux_known: bool) -> None:
    name = f"dpkg-query_debstatus_debian-{release}.txt"
    names = ["podman", "docker.io", "tmux", "gpurig-no-such-package"]
    assert header(name)["command"] == DebStatus().command(names)
    found = DebStatus().process(body(name).splitlines())
    assert found["podman"] == {"version": podman, "held": True}
    assert found["docker.io"] == {"version": docker, "held": False}
    # dpkg 1.22 lists a package it knows of but never installed as `un`; 1.20 leaves it out.
    assert ("tmux" in found) is tmux_known and found.get("tmux", {}).get("version") is None
    assert "gpurig-no-such-package" not in found


@pytest.mark.parametrize(
    ("release", "libc"), [("11", "2.31-13+deb11u11"), ("13", "2.41-12+deb13u5")]
)
def test_driver_packages_named_with_their_architecture(release: str, libc: str) -> None:
    name = f"dpkg-query_driverpackages_debian-{release}.txt"
    assert header(name)["command"] == DriverPackages().command(["libc6", "docker*"])
    found = DriverPackages().process(body(name).splitlines())
    assert found["libc6:amd64"] == {"version": libc, "held": False}
    assert found["docker-compose"] == {"version": None, "held": False}  # `un`: not installed
    assert found["docker.io"]["version"] is not None


def refused(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """What gpurig's apt() wrapper says, waiting 0 s, about a command that refuses exactly as
    the recording did (its stderr, its exit status)."""
    monkeypatch.setattr(packages, "lock_wait", lambda: 0)
    recorded = tmp_path / "stderr"
    recorded.write_text(body(name))
    status = re.fullmatch(r"err \(exit status (\d+)\)", header(name)["stream"])
    assert status is not None
    stand_in = f"sh -c 'cat {recorded} >&2; exit {status[1]}'"
    done = subprocess.run(["sh", "-c", packages.apt(stand_in)], capture_output=True, text=True)
    assert done.returncode == int(status[1])
    gave_up = "gpurig: gave up after waiting 0 s for another apt or dpkg: "
    [line] = [line for line in done.stderr.splitlines() if line.startswith("gpurig: ")]
    assert line.startswith(gave_up), line
    return line.removeprefix(gave_up)


@pytest.mark.parametrize("release", ["11", "13"])
def test_apt_get_update_names_the_lists_lock_holder(
    release: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = refused(f"apt-get-update_lists-lock-held_debian-{release}.txt", tmp_path, monkeypatch)
    assert re.fullmatch(
        r"E: Could not get lock /var/lib/apt/lists/lock\. It is held by process \d+ \(apt-get\)",
        held,
    )


@pytest.mark.parametrize("release", ["11", "13"])
def test_apt_get_install_past_its_timeout_is_seen_as_a_held_lock(
    release: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After DPkg::Lock::Timeout apt-get's stderr names the lock, not its holder (apt 3.0 says
    the holder on stdout while it waits; apt 2.2 not at all without a terminal)."""
    name = f"apt-get-install_frontend-lock-held_debian-{release}.txt"
    assert refused(name, tmp_path, monkeypatch) == (
        "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), "
        "is another process using it?"
    )


@pytest.mark.parametrize(
    ("release", "holder"),
    [("11", "another process"), ("12", "another process"), ("13", "/usr/bin/apt-get process")],
)
def test_apt_mark_names_dpkgs_lock_holder(
    release: str, holder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dpkg 1.22 (Debian 13) names the holder's program where 1.20 and 1.21 said `another
    process`: both are a held lock, waited for."""
    name = f"apt-mark-hold_frontend-lock-held_debian-{release}.txt"
    held = refused(name, tmp_path, monkeypatch)
    pid = re.search(r"pid (\d+)$", held)
    assert held == f"dpkg: error: dpkg frontend lock was locked by {holder} with pid {pid[1]}"
