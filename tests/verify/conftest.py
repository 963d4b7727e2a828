"""The declared spec of the host under test, from the inventory in $GPURIG_INVENTORY.

    GPURIG_INVENTORY=inventories/fleet.yaml pytest tests/verify --hosts=ssh://a100-1 ...

Without an inventory the checks use gpurig's defaults (core dumps off) only.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from gpurig.inventory import load_inventory


@pytest.fixture(scope="module")
def spec(host) -> dict[str, Any]:
    paths = [p for p in os.environ.get("GPURIG_INVENTORY", "").split(os.pathsep) if p]
    if not paths:
        return {}
    name = host.backend.get_hostname()
    for entry in load_inventory(paths).hosts:
        if name in (entry.name, entry.address):
            return entry.spec
    pytest.fail(f"{name} is not in {', '.join(paths)}")
