"""The session's sandbox: brought up once, brought down at the end, checked for leftovers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import Sandbox

from gpurig.sandbox.leftovers import leftovers
from gpurig.sandbox.state import index_dir


@pytest.fixture(scope="session")
def sandbox() -> Iterator[Sandbox]:
    if os.geteuid() != 0:
        pytest.fail("integration tests need root (the sandbox makes namespaces and containers)")
    # A fixed name, so a run that was killed is cleaned up by the next one's `down`; its own
    # name, so the demo's sandbox (or another run's, under another name) keeps running.
    name = os.environ.get("GPURIG_TEST_SANDBOX", "test")
    top = os.environ.get("GPURIG_TEST_SANDBOX_DIR")
    box = Sandbox(name, Path(top) if top else index_dir() / name)
    proc = box.down()
    assert proc.returncode == 0, proc.stderr
    proc = box.up()
    assert proc.returncode == 0, proc.stderr
    yield box
    state = box.state
    proc = box.down()
    assert proc.returncode == 0, proc.stderr
    left = leftovers(box.top, state)
    if left:
        pytest.fail(f"sandbox down left: {left}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that take the sandbox down or kill its processes run after all the others; the
    demo, minutes long, runs last; `late` ones after the others that start from bare hosts."""
    items.sort(
        key=lambda item: (
            item.get_closest_marker("last") is not None,
            item.get_closest_marker("disruptive") is not None,
            item.get_closest_marker("late") is not None,
        )
    )
