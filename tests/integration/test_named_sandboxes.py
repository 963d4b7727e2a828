"""Two named sandboxes brought up at once on one machine: each with its own bridge, subnets
and service ports, each converged, one taken down without touching the other; then
`down --all` removes the rest by its records. Uses a private index (XDG_STATE_HOME) so
`list` and `down --all` see only this test's sandboxes, never the session's or the demo's."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support import Sandbox, gpurig, remote, run_verify, write_inventory

from gpurig.remote.converge import converge
from gpurig.sandbox.leftovers import leftovers

HOSTS = ["fleet-001", "full-1"]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(tmp_path_factory.mktemp("state"))}


@pytest.fixture(scope="module")
def pair(env: dict[str, str]) -> Iterator[tuple[Sandbox, Sandbox]]:
    if os.geteuid() != 0:
        pytest.fail("integration tests need root (the sandbox makes namespaces and containers)")
    index = Path(env["XDG_STATE_HOME"], "gpurig", "sandboxes")
    tag = f"p{os.getpid() % 10**6}"  # unique on this machine while this run lasts
    boxes = tuple(Sandbox(f"{tag}-{x}", index / f"{tag}-{x}", env=env) for x in "ab")
    with ThreadPoolExecutor(2) as pool:  # at once: the slot allocation must not collide
        procs = list(pool.map(lambda box: box.up(fleet=1, full=1), boxes))
    try:
        for proc in procs:
            assert proc.returncode == 0, proc.stdout + proc.stderr
        yield boxes
    finally:
        for box in boxes:
            box.down()


def listing(env: dict[str, str]) -> dict[str, dict]:
    proc = gpurig("sandbox", "list", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return {row["name"]: row for row in json.loads(proc.stdout)}


def registry_answers(box: Sandbox) -> bool:
    with urllib.request.urlopen(f"http://{box.registry}/v2/", timeout=5) as resp:
        return resp.status == 200


def test_both_run_with_their_own_network_and_ports(pair, env):
    a, b = (box.state for box in pair)
    assert a.bridge != b.bridge and a.podman_interface != b.podman_interface
    assert a.network != b.network and a.podman_subnet != b.podman_subnet
    assert not set(a.ports.values()) & set(b.ports.values())
    rows = listing(env)
    assert {name: row["status"] for name, row in rows.items()} == {box.name: "up" for box in pair}
    assert {rows[box.name]["subnet"] for box in pair} == {a.network, b.network}
    for box in pair:
        assert box.cli("status").returncode == 0
        assert registry_answers(box)


def test_a_host_converges_in_each(pair, tmp_path: Path):
    for box in pair:
        specs = {name: {"core_dumps": "disabled"} for name in HOSTS}
        inventory = write_inventory(box, tmp_path / f"{box.name}.yaml", specs)
        result = converge([inventory], limit=HOSTS)
        assert result.returncode == 0, result.stderr
        verify = run_verify(box, HOSTS)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        for name in HOSTS:  # the same host names, different hosts: each knows its sandbox
            assert remote(box, name).check_output("hostname -I").split()[0] in {
                h.address for h in box.state.hosts.values()
            }


def test_one_goes_down_and_the_other_keeps_running(pair, env):
    a, b = pair
    before = a.state
    proc = a.down()
    assert proc.returncode == 0, proc.stderr
    assert leftovers(a.top, before) == []
    assert list(listing(env)) == [b.name]
    assert b.cli("status").returncode == 0
    assert registry_answers(b)
    for name in HOSTS:
        assert remote(b, name).check_output("hostname") == name


def test_down_all_removes_every_sandbox_by_its_records(pair, env):
    b = pair[1]
    before = b.state
    proc = gpurig("sandbox", "down", "--all", env=env)
    assert proc.returncode == 0, proc.stderr
    assert leftovers(b.top, before) == []
    assert listing(env) == {}
