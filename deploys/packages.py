"""Debian packages the spec lists (`spec.packages`)."""

from __future__ import annotations

from typing import Any

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.deb import DebPackages
from pyinfra.operations import apt


def ensure_packages(wanted: list[str]) -> None:
    """Install `wanted`, refreshing the apt lists only when something is missing: a converged
    host never needs the network, and `apt.update` without a cache time is always a change."""
    installed = host.get_fact(DebPackages)
    missing = [name for name in wanted if name not in installed]
    apt.packages(
        name=f"Install {', '.join(wanted)}",
        packages=wanted,
        update=bool(missing),
        cache_time=3600,
        no_recommends=True,
    )


@deploy("Packages")
def packages(spec: dict[str, Any]) -> None:
    if spec.get("packages"):
        ensure_packages(spec["packages"])
