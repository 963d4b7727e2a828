"""The session's sandbox: brought up once, brought down at the end, checked for leftovers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import ReleaseHosts, Sandbox

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


# The fixtures that hold a release's hosts (tests/integration/test_releases.py's `release`,
# test_node_py39.py's `release_host`), each parametrized by the release's suite.
RELEASE_FIXTURES = ("release", "release_host")


def release_of(item: pytest.Item) -> str | None:
    """The release suite whose hosts `item` needs, None for none."""
    params = getattr(item, "callspec", None)
    found = [params.params[name] for name in RELEASE_FIXTURES if params and name in params.params]
    return found[0] if found else None


RELEASE_USERS = pytest.StashKey[dict[str, set[str]]]()


@pytest.fixture(scope="session")
def release_hosts(sandbox: Sandbox, request: pytest.FixtureRequest) -> Iterator[ReleaseHosts]:
    hosts = ReleaseHosts(sandbox, request.config.stash.get(RELEASE_USERS, {}))
    yield hosts
    hosts.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that take the sandbox down or kill its processes run after all the others; the
    demo, minutes long, runs last; `late` ones after the others that start from bare hosts;
    the tests on a release's hosts after the others of their kind, a release at a time."""
    items.sort(
        key=lambda item: (
            item.get_closest_marker("last") is not None,
            item.get_closest_marker("disruptive") is not None,
            item.get_closest_marker("late") is not None,
            release_of(item) is not None,
            release_of(item) or "",  # one release's hosts at a time
        )
    )
    users: dict[str, set[str]] = {}
    for item in items:
        suite = release_of(item)
        if suite is not None:
            users.setdefault(suite, set()).add(item.module.__name__)
    config.stash[RELEASE_USERS] = users
