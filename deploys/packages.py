"""Debian packages the spec lists (`packages`), and the install step other concerns reuse."""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra.api import deploy, operation

from deploys.changes import apply
from deploys.snapshot import read
from gpurig.change import Change
from gpurig.plans import packages as plan


def install(change: Change) -> str:
    """apt-get for a `packages.missing` change; the lists are refreshed only then, so a
    converged host never needs the network. `--` keeps a name from being read as an option."""
    names = " ".join(shlex.quote(name) for name in change.data["packages"])
    return (
        "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
        f"--no-install-recommends -- {names}"
    )


@operation()
def declared_packages(spec: dict[str, Any]):
    """Install the spec's packages that are missing."""
    yield from apply(plan.plan(spec, read), "every declared package is installed",
                     lambda change: [install(change)])  # fmt: skip


@deploy("Packages")
def packages(spec: dict[str, Any]) -> None:
    if spec["packages"]:
        declared_packages(name=f"Install {', '.join(spec['packages'])}", spec=spec)
