"""The NVIDIA driver (`driver`): its packages held and kept from unattended-upgrades first, then
a driver that moved or is missing refused (the converge never installs a kernel driver)."""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra.api import OperationError, deploy, operation

from gpurig.deploys.changes import apply
from gpurig.deploys.core_dumps import write
from gpurig.deploys.packages import apt
from gpurig.deploys.snapshot import read
from gpurig.plans import driver as plan
from gpurig.plans.change import Change
from gpurig.plans.driver import PACKAGE_NAME


def hold(names: list[str]) -> str:
    """`apt-mark hold` for names read from the host: each checked again (a name starts with a
    letter or digit, so none reads as an option), then quoted."""
    odd = [n for n in names if not PACKAGE_NAME.fullmatch(n)]
    if odd:
        raise OperationError(f"not a package name, left alone: {odd[0][:80]!r}")
    return apt(f"apt-mark hold {' '.join(shlex.quote(n) for n in names)}")


def commands(change: Change):
    if change.id == "driver.hold":
        return [hold(change.data["packages"])]
    return write(change)  # driver.unattended


@operation()
def driver_hold(spec: dict[str, Any]):
    """Hold the installed driver packages; gpurig's unattended-upgrades blacklist."""
    changes = [c for c in plan.plan(spec, read) if not c.refused]
    yield from apply(changes, "the driver packages are held", commands)


@operation()
def driver_version(spec: dict[str, Any]):
    """Refuse a driver that moved or is missing; there is never anything to run."""
    changes = [c for c in plan.plan(spec, read) if c.refused]
    yield from apply(changes, f"NVIDIA driver {spec['driver']['version']}", lambda change: [])


@deploy("NVIDIA driver")
def driver(spec: dict[str, Any]) -> None:
    if spec.get("driver"):
        version = spec["driver"]["version"]
        driver_hold(name=f"Hold the NVIDIA driver {version}", spec=spec)
        driver_version(name=f"Check the NVIDIA driver is {version}", spec=spec)
