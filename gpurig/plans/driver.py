"""The NVIDIA driver (`driver: {version, hold}`): kept where it is, never installed. The
converge holds the installed driver packages and keeps unattended-upgrades off them (a driver
upgraded under a running job breaks it until the next reboot: NVML's driver/library version
mismatch). A driver that moved anyway, or is missing, is refused: replacing a kernel driver
needs a reboot, which is the user's call, not the converge's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from gpurig.data.tables import table
from gpurig.facts.gpurig_nvidia import NvidiaGpus
from gpurig.facts.gpurig_packages import DriverPackages
from gpurig.plans.change import Change
from gpurig.plans.files import managed
from gpurig.spec.pattern import lazy
from gpurig.spec.user_scope import is_user

UNATTENDED = "/etc/apt/apt.conf.d/99gpurig-nvidia-driver"
# What a host-provided name must look like before it reaches a command line.
PACKAGE_NAME = lazy(r"[a-z0-9][a-z0-9+.-]+(:[a-z0-9-]+)?")
REMEDY = (
    "install the NVIDIA driver {v} yourself (with the packages of your distribution or NVIDIA's "
    "repository) and reboot: gpurig never installs or replaces a kernel driver, which would "
    "break a running job"
)


def globs() -> list[str]:
    """dpkg-query patterns for the driver's packages (gpurig/data/driver.yaml)."""
    return list(table("driver.yaml")["held"])


def blacklist() -> list[str]:
    """unattended-upgrades' Package-Blacklist entries: regular expressions it matches at the
    start of a package name, so a glob's prefix, or a whole name closed with `$`."""
    return [g[:-1] if g.endswith("*") else f"{g}$" for g in globs()]


def unattended_conf() -> str:
    entries = "".join(f'    "{entry}";\n' for entry in blacklist())
    return (
        "// Managed by gpurig: unattended-upgrades leaves the NVIDIA driver alone (each entry\n"
        "// is a regular expression matched at the start of a package name).\n"
        f"Unattended-Upgrade::Package-Blacklist {{\n{entries}}};\n"
    )


def _matches(name: str, key: str) -> bool:
    bare = name.split(":", 1)[0]
    return any(fnmatchcase(bare, glob) for glob in table("driver.yaml")[key])


def installed(found: Mapping[str, Any]) -> dict[str, Any]:
    """The installed driver packages among what dpkg-query matched, the toolkit's left out."""
    return {
        name: state
        for name, state in sorted(found.items())
        if state["version"] and not _matches(name, "not_driver")
    }


def upstream(version: str) -> str:
    """A Debian version's upstream part: `580.95.05-0ubuntu0.24.04.2` -> `580.95.05`."""
    return version.split(":", 1)[-1].rsplit("-", 1)[0]


def _version(version: str, gpu: Mapping[str, Any], packages: Mapping[str, Any]) -> list[Change]:
    moved = {
        name: state["version"]
        for name, state in packages.items()
        if _matches(name, "versioned") and upstream(state["version"]) != version
    }
    running = gpu["driver"] if gpu["present"] else None
    if running in (None, version) and not moved:
        return []
    actual = [f"running {running}"] if running not in (None, version) else []
    actual += [f"{name} {v}" for name, v in moved.items()]
    return [
        Change(
            "driver.version",
            "NVIDIA driver",
            version,
            ", ".join(actual),
            REMEDY.format(v=version),
            refused=True,
        )
    ]


def plan(spec: Mapping[str, Any], read: Callable[..., Any]) -> list[Change]:
    driver = spec.get("driver")
    if not driver:
        return []
    version = driver["version"]
    gpu = read(NvidiaGpus)
    packages = installed(read(DriverPackages, globs=globs()))
    # A user can change neither apt's configuration nor holds: the driver is only checked.
    wanted = {} if is_user(spec) else {UNATTENDED: unattended_conf() if driver["hold"] else None}
    conf = managed("driver.unattended", wanted, read)
    if not packages and not gpu["present"]:
        return [
            *conf,
            Change(
                "driver.missing",
                "NVIDIA driver",
                version,
                f"no driver package installed, and no GPU answers: {gpu['error']}",
                REMEDY.format(v=version),
                refused=True,
            ),
        ]
    unheld = [n for n, state in packages.items() if not state["held"]] if driver["hold"] else []
    hold = [
        Change(
            "driver.hold",
            "NVIDIA driver packages",
            "held",
            f"not held: {', '.join(unheld)}",
            f"apt-mark hold {' '.join(unheld)}",
            data={"packages": unheld},
        )
    ]
    return conf + (hold if unheld else []) + _version(version, gpu, packages)
