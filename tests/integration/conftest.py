"""The session's sandbox: brought up once, brought down at the end, checked for leftovers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import Sandbox, gpurig

from gpurig.fsutil import xdg_dir
from gpurig.sandbox.leftovers import leftovers


@pytest.fixture(scope="session")
def sandbox() -> Iterator[Sandbox]:
    if os.geteuid() != 0:
        pytest.fail("integration tests need root (the sandbox makes namespaces and containers)")
    # A fixed place, so a run that was killed is cleaned up by the next one's `down`.
    top = os.environ.get("GPURIG_TEST_SANDBOX_DIR")
    box = Sandbox(Path(top) if top else xdg_dir("XDG_STATE_HOME", ".local/state", "test-sandbox"))
    proc = gpurig("sandbox", "down", "--dir", str(box.top))
    assert proc.returncode == 0, proc.stderr
    proc = box.up()
    assert proc.returncode == 0, proc.stderr
    yield box
    state = box.state
    proc = gpurig("sandbox", "down", "--dir", str(box.top))
    assert proc.returncode == 0, proc.stderr
    left = leftovers(box.top, state)
    if left:
        pytest.fail(f"sandbox down left: {left}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that take the sandbox down or kill its processes run after all the others."""
    items.sort(key=lambda item: item.get_closest_marker("disruptive") is not None)
