"""The declared spec of the host under test, from the inventory in $GPURIG_INVENTORY.

    GPURIG_INVENTORY=inventories/fleet.yaml pytest tests/verify --hosts=ssh://a100-1 ...

Without an inventory the checks use gpurig's defaults (core dumps off) only, and a check of
what a host would declare (an engine, containers) is skipped saying that no inventory was read.

Only the `ssh://` backend (OpenSSH, checking host keys as the ssh config says: use
StrictHostKeyChecking yes) and backends that do not use SSH are accepted. testinfra's
`paramiko://` backend, which is also what a host without a scheme gets, accepts any host key
it has not seen before, so the suite refuses to start with it rather than talk to whatever
answers at the address.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, NoReturn

import pytest
from testinfra.backend import parse_hostspec

from gpurig.spec.inventory import load_inventory


def paramiko_hosts(hosts: str | None, connection: str | None) -> list[str]:
    """The `--hosts` entries testinfra would reach through its paramiko backend."""
    found = []
    for spec in (hosts or "").split(","):
        if spec:
            _, options = parse_hostspec(spec)
            if (options.get("connection") or connection or "paramiko") == "paramiko":
                found.append(spec)
    return found


def pytest_configure(config: pytest.Config) -> None:
    refused = paramiko_hosts(config.option.hosts, config.option.connection)
    if refused:
        raise pytest.UsageError(
            f"tests/verify: {', '.join(refused)} would connect with testinfra's paramiko "
            "backend, which accepts any unknown host key; use ssh://HOST with an ssh config "
            "that has StrictHostKeyChecking yes"
        )


def _paths() -> list[str]:
    return [p for p in os.environ.get("GPURIG_INVENTORY", "").split(os.pathsep) if p]


@pytest.fixture
def undeclared() -> Callable[[str], NoReturn]:
    """skip(reason) for a check the host's spec does not ask for; without GPURIG_INVENTORY the
    reason says so, since then no spec was read at all."""

    def skip(reason: str) -> NoReturn:
        if not _paths():
            reason += (
                " (GPURIG_INVENTORY is not set, so no inventory was read: run "
                "GPURIG_INVENTORY=inventories/fleet.yaml pytest tests/verify ...)"
            )
        pytest.skip(reason)

    return skip


@pytest.fixture(scope="module")
def spec(host) -> dict[str, Any]:
    paths = _paths()
    if not paths:
        return {}
    name = host.backend.get_hostname()
    for entry in load_inventory(paths).hosts:
        if name in (entry.name, entry.address):
            return entry.spec
    pytest.fail(f"{name} is not in {', '.join(paths)}")
