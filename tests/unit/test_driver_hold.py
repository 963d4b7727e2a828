"""The driver concern beyond its change table: what counts as the driver and as moved, the
dpkg-query fact on recorded and on this machine's real output, the unattended-upgrades file as
apt itself merges it and as unattended-upgrades matches it, and the hold command's re-check."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from gpu_fixtures import read_fixture
from pyinfra.api import OperationError
from test_plans import DRIVER, converged, reader

from gpurig.deploys import packages
from gpurig.deploys.driver import hold
from gpurig.facts.gpurig_packages import DriverPackages
from gpurig.plans import driver, plan_host

FIXTURE = "dpkg-query_driver-packages_ubuntu_510.47.03.txt"


def driver_changes(mutate: Any) -> list:
    state = copy.deepcopy(converged("docker"))
    mutate(state)
    return [c for c in plan_host(state["spec"], reader(state)) if c.id.startswith("driver.")]


def test_packages_upgraded_under_the_running_driver_are_refused_naming_them():
    """unattended-upgrades' case: the libraries moved, the module still runs the old driver."""

    def upgraded(state: dict[str, Any]) -> None:
        for name in ("nvidia-driver-590", "libnvidia-compute-590:amd64"):
            state["driver_packages"][name]["version"] = "590.48.02-0ubuntu1"

    [change] = driver_changes(upgraded)
    assert change.id == "driver.version" and change.refused
    assert change.expected == DRIVER and "running" not in change.actual
    assert "nvidia-driver-590 590.48.02-0ubuntu1" in change.actual
    assert "libnvidia-compute-590:amd64" in change.actual and "reboot" in change.action


def test_a_running_driver_that_moved_is_named_with_the_packages():
    def moved(state: dict[str, Any]) -> None:
        state["gpu"]["driver"] = "580.95.05"
        state["driver_packages"]["nvidia-driver-590"]["version"] = "1:580.95.05-0ubuntu1"

    [change] = driver_changes(moved)
    assert change.actual == "running 580.95.05, nvidia-driver-590 1:580.95.05-0ubuntu1"


def test_no_gpu_answering_judges_the_packages_alone():
    """gpu: auto and no GPU: packages at the declared version are no drift; none is."""

    def no_gpu(state: dict[str, Any]) -> None:
        state["gpu"].update(present=False, driver=None, error="nvidia-smi is not installed")

    assert driver_changes(no_gpu) == []
    [missing] = driver_changes(lambda s: (no_gpu(s), s.update(driver_packages={})))
    assert missing.refused and "nvidia-smi is not installed" in missing.actual


def test_a_driver_installed_without_packages_is_judged_by_the_running_one():
    """A .run-installed driver (common on rentals): nothing to hold, the version still read."""
    assert driver_changes(lambda s: s.update(driver_packages={})) == []
    [change] = driver_changes(
        lambda s: (s.update(driver_packages={}), s["gpu"].update(driver="570.124.06"))
    )
    assert change.id == "driver.version" and change.actual == "running 570.124.06"


def test_hold_false_leaves_holds_alone_and_removes_gpurig_s_file():
    def unheld(state: dict[str, Any]) -> None:
        state["spec"]["driver"]["hold"] = False
        state["driver_packages"]["nvidia-driver-590"]["held"] = False

    [change] = driver_changes(unheld)
    assert change.id == "driver.unattended" and change.expected == "absent"


def test_the_toolkit_and_other_software_are_not_the_driver():
    found = DriverPackages().process(read_fixture(FIXTURE).splitlines())
    assert found["libnvidia-compute-495:amd64"] == {"version": None, "held": False}  # rc
    assert found["libnvidia-common"] == {"version": None, "held": False}  # un
    # A leftover library of an older branch is held, but only versioned packages are judged.
    assert list(driver.installed(found)) == [
        "libnvidia-cfg1-510:amd64", "libnvidia-common-495", "libnvidia-common-510"
    ]  # fmt: skip
    toolkit = {"libnvidia-container1:amd64": {"version": "1.17.8-1", "held": True},
               "nvidia-container-toolkit": {"version": "1.17.8-1", "held": False}}  # fmt: skip
    assert driver.installed(toolkit) == {}


@pytest.mark.parametrize(
    "line",
    [
        "nvidia-driver-580\t580.95.05-1",  # a field missing
        "-oops\t580.95.05-1\tii",  # would read as an option
        "nvidia-driver-580;reboot\t580.95.05-1\tii",
        "nvidia-driver-580\t580.95.05-1\tzz",
        "nvidia driver\t580.95.05-1\tii",
    ],
)
def test_odd_dpkg_query_lines_are_refused(line: str):
    with pytest.raises(ValueError, match="unexpected dpkg-query line"):
        DriverPackages().process([line])


@pytest.mark.skipif(not shutil.which("dpkg-query"), reason="needs dpkg (Debian)")
def test_the_query_runs_here_for_real():
    """This machine has no NVIDIA driver: the driver's globs match nothing installed, and a
    glob that matches (libc6*) comes back with dpkg's own architecture qualifiers."""
    fact = DriverPackages()
    out = subprocess.run(["sh", "-c", fact.command(globs=driver.globs())], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert driver.installed(fact.process(out.splitlines())) == {}
    out = subprocess.run(["sh", "-c", fact.command(globs=["libc6*", "gpurig-none*"])],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    found = fact.process(out.splitlines())
    [libc] = [n for n in found if n.split(":")[0] == "libc6"]
    assert found[libc]["version"] and driver.PACKAGE_NAME.fullmatch(libc)


SAMPLES = [
    "nvidia-driver-580", "nvidia-dkms-580-open", "libnvidia-compute-580", "nvidia-driver",
    "nvidia-kernel-dkms", "libcuda1", "cuda-drivers-580", "xserver-xorg-video-nvidia-580",
    "firmware-nvidia-gsp", "nvidia-open",
]  # fmt: skip


def test_unattended_upgrades_matches_every_driver_package_and_nothing_else():
    """unattended-upgrades tests each entry with re.match (its is_pkgname_in_blacklist)."""
    entries = driver.blacklist()
    for name in SAMPLES:
        assert any(re.match(e, name) for e in entries), name
    for name in ("linux-modules-nvidia-580-generic", "libcuda1-dbg", "libcudart12", "curl"):
        assert not any(re.match(e, name) for e in entries), name
    assert all(re.fullmatch(r"[a-z0-9-]+\*?", g) for g in driver.globs())  # nothing to escape


@pytest.mark.skipif(not shutil.which("apt-config"), reason="needs apt (Debian)")
def test_apt_appends_the_blacklist_to_the_distribution_s(tmp_path: Path):
    """apt reads every file in apt.conf.d and appends list entries, so gpurig's file adds to
    the distribution's 50unattended-upgrades instead of replacing it."""
    parts = tmp_path / "apt.conf.d"
    parts.mkdir()
    (parts / "50unattended-upgrades").write_text(
        'Unattended-Upgrade::Package-Blacklist {\n    "linux-";\n};\n'
    )
    (parts / Path(driver.UNATTENDED).name).write_text(driver.unattended_conf())
    main = tmp_path / "apt.conf"
    main.write_text(f'Dir::Etc::Parts "{parts}";\n')
    dump = subprocess.run(["apt-config", "dump"], env={"APT_CONFIG": str(main)},
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    listed = re.findall(r'^Unattended-Upgrade::Package-Blacklist:: "(.*)";$', dump, re.M)
    assert listed == ["linux-", *driver.blacklist()]


def test_the_hold_command_rechecks_every_name(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(packages, "lock_wait", lambda: 600)  # outside a pyinfra run
    command = hold(["nvidia-driver-580", "libnvidia-compute-580:i386"])
    assert command == packages.apt("apt-mark hold nvidia-driver-580 libnvidia-compute-580:i386")
    with pytest.raises(OperationError, match="not a package name"):
        hold(["nvidia-driver-580", "x; reboot"])
