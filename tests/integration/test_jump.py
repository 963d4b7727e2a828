"""Hosts reachable only through a login node (`ssh.jump`), on a sandbox of their own: a login
node on the bridge and two fleet hosts on its private network (`sandbox up --behind-login 2`).
This machine has no way to them; drift, the converge and onboarding go through the login node
with both host keys pinned, and a wrong key on either hop is refused, naming the hop."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support import Sandbox, gpurig, remote

from gpurig.remote.converge import converge
from gpurig.remote.drift import run_drift
from gpurig.sandbox.keys import ensure_keypair, public_key
from gpurig.sandbox.leftovers import leftovers
from gpurig.sandbox.proc import kill, wait_port_in
from gpurig.sandbox.state import index_dir
from gpurig.spec.hostkeys import changed_message
from gpurig.spec.inventory import load_inventory

NODES = ["node-001", "node-002"]
TIMEOUT = 5


@pytest.fixture(scope="module")
def cluster() -> Iterator[Sandbox]:
    if os.geteuid() != 0:
        pytest.fail("integration tests need root (the sandbox makes namespaces and containers)")
    # Its own sandbox, so the session's inventory never grows a login node under other tests;
    # a fixed name, so a killed run's is cleaned up by the next one's `down`.
    name = os.environ.get("GPURIG_TEST_SANDBOX", "test")[:7] + "-jump"
    box = Sandbox(name, index_dir() / name)
    assert box.down().returncode == 0
    proc = box.cli("up", "--fleet", "0", "--full", "0", "--behind-login", str(len(NODES)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    yield box
    state = box.state
    proc = box.down()
    assert proc.returncode == 0, proc.stderr
    assert leftovers(box.top, state) == []


def inventory(box: Sandbox, path: Path, edit=None) -> Path:
    """The sandbox's inventory (login node in `behind-login`'s ssh.jump), edited, written."""
    doc = yaml.safe_load(box.paths.inventory.read_text())
    # The sandbox shares this machine's disk: onboarding's 50g default headroom is too much.
    doc["groups"]["fleet"]["spec"]["checks"] = {"disk_free_min": "1g", "inodes_free_min_pct": 1}
    if edit:
        edit(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def other_key(tmp_path: Path) -> str:
    return public_key(ensure_keypair(tmp_path / "other", "re-created"))


def drift(path: Path, *names: str) -> tuple[int, dict[str, list[dict]]]:
    limits = [arg for name in names for arg in ("--limit", name)]
    proc = gpurig("drift", str(path), *limits, "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, {h["name"]: h["findings"] for h in json.loads(proc.stdout)["hosts"]}


def logins(box: Sandbox) -> int:
    """Logins the login node's sshd has accepted so far (its log: `sshd -D -e`)."""
    log = (box.paths.hosts / "login" / "sshd.log").read_text()
    return len(re.findall(r"^Accepted publickey for root", log, re.M))


def held_to(address: str) -> list[str]:
    """This process's open TCP sockets to address:22 (a closed one may linger a moment in
    the kernel, owned by no process: not counted)."""
    out = subprocess.run(
        ["ss", "-Htnp", "dst", f"{address}:22"], capture_output=True, text=True, check=True
    ).stdout
    return [line for line in out.splitlines() if f"pid={os.getpid()}," in line]


def test_only_the_login_node_reaches_them(cluster: Sandbox, tmp_path: Path):
    state = cluster.state
    login = state.hosts["login"]
    for name in NODES:
        node = state.hosts[name]
        with pytest.raises(OSError):  # no route to host: nothing answers for it on the bridge
            socket.create_connection((node.address, 22), timeout=TIMEOUT).close()
        assert wait_port_in(login.netns, node.address, 22, TIMEOUT)

    # Without the jump, gpurig cannot reach them either.
    def without_jump(doc: dict) -> None:
        del doc["groups"]["behind-login"]
        for name in NODES:
            doc["hosts"][name]["groups"] = ["fleet"]

    rc, hosts = drift(inventory(cluster, tmp_path / "direct.yaml", without_jump), *NODES)
    assert rc == 1
    for name in NODES:
        assert [f["id"] for f in hosts[name]] == ["host.unreachable"]


def test_drift_goes_through_one_login_and_closes_it(cluster: Sandbox, tmp_path: Path):
    path = inventory(cluster, tmp_path / "inv.yaml")
    before = logins(cluster)
    rc, hosts = drift(path, *NODES)
    assert rc == 1  # not converged yet: read, and found wanting
    for name in NODES:
        ids = {f["id"] for f in hosts[name]}
        assert ids and not ids & {"host.unreachable", "host.key_changed"}, hosts[name]
    assert logins(cluster) == before + 1  # both hosts through one login to the login node
    # In this process too: every connection to the login node is gone once drift returns.
    login = cluster.state.hosts["login"].address
    behind = [h for h in load_inventory([path]).hosts if h.name in NODES]
    reports = run_drift(behind, tmp_path / "cache")
    assert [r.reachable for r in reports] == [True, True]
    assert held_to(login) == []


def test_converge_through_the_login_node_then_nothing_to_do(cluster: Sandbox, tmp_path: Path):
    path = inventory(cluster, tmp_path / "inv.yaml")
    first = converge([path], limit=["node-001"])
    assert first.returncode == 0, first.stderr
    assert first.change_count > 0
    again = converge([path], limit=["node-001"])
    assert again.returncode == 0, again.stderr
    assert again.change_count == 0, again.changed
    rc, hosts = drift(path, "node-001")
    assert rc == 0, hosts
    # Seen by plain OpenSSH through the same login node (the sandbox's ssh_config).
    assert remote(cluster, "node-001").file("/etc/profile.d/gpurig-core.sh").exists


def test_onboard_through_the_login_node(cluster: Sandbox, tmp_path: Path):
    node = cluster.state.hosts["node-002"]
    path = inventory(cluster, tmp_path / "inv.yaml", lambda d: d["hosts"].pop("node-002"))
    proc = gpurig("onboard", node.address, "--name", "node-002", "--inventory", str(path),
                  "--group", "fleet", "--group", "behind-login", "--yes",
                  "--timeout", str(TIMEOUT))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "trusted on first use" in proc.stdout
    assert re.search(r"converge: [1-9]\d* change", proc.stdout), proc.stdout
    assert "verify: drift clean" in proc.stdout
    [host] = [h for h in load_inventory([path]).hosts if h.name == "node-002"]
    assert host.ssh.host_key == node.host_key  # read through the login node, recorded
    assert host.ssh.jump and host.ssh.jump.host_key == cluster.state.hosts["login"].host_key


def test_a_wrong_login_node_key_is_refused_everywhere(cluster: Sandbox, tmp_path: Path):
    wrong = other_key(tmp_path)
    login = cluster.state.hosts["login"]
    jump = f"{login.address}:22"

    def edit(doc: dict) -> None:
        doc["groups"]["behind-login"]["ssh"]["jump"]["host_key"] = wrong

    path = inventory(cluster, tmp_path / "inv.yaml", edit)
    before = logins(cluster)
    rc, hosts = drift(path, *NODES)
    assert rc == 1
    for name in NODES:
        [finding] = hosts[name]
        assert finding["id"] == "host.key_changed"
        assert finding["message"] == changed_message(name, str(path), jump)
    result = converge([path], limit=NODES)
    assert result.returncode != 0
    assert sorted(result.messages) == [changed_message(n, str(path), jump) for n in NODES]
    assert not result.changed

    def edit_unrecorded(doc: dict) -> None:
        edit(doc)
        del doc["hosts"]["node-002"]

    unrecorded = inventory(cluster, tmp_path / "new.yaml", edit_unrecorded)
    written = unrecorded.read_bytes()
    proc = gpurig("onboard", cluster.state.hosts["node-002"].address, "--name", "node-002",
                  "--inventory", str(unrecorded), "--group", "fleet", "--group", "behind-login",
                  "--yes", "--timeout", str(TIMEOUT))  # fmt: skip
    assert proc.returncode == 1
    assert f"preflight: {changed_message('node-002', str(unrecorded), jump)}" in proc.stderr
    assert unrecorded.read_bytes() == written
    assert logins(cluster) == before  # refused at key exchange, before any login


def test_a_wrong_key_behind_the_login_node_is_refused(cluster: Sandbox, tmp_path: Path):
    def edit(doc: dict) -> None:
        doc["hosts"]["node-001"]["ssh"]["host_key"] = other_key(tmp_path)

    path = inventory(cluster, tmp_path / "inv.yaml", edit)
    rc, hosts = drift(path, *NODES)
    assert rc == 1
    [finding] = hosts["node-001"]
    assert finding["id"] == "host.key_changed"
    assert finding["message"] == changed_message("node-001", str(path))  # the host, not the hop
    assert not {f["id"] for f in hosts["node-002"]} & {"host.key_changed", "host.unreachable"}
    result = converge([path], limit=["node-001"])
    assert result.returncode != 0
    assert result.messages == [changed_message("node-001", str(path))]


def test_up_rewires_the_hosts_behind_a_restarted_login_node(cluster: Sandbox, tmp_path: Path):
    login = cluster.state.hosts["login"]
    assert kill(login.pid, login.started)
    proc = cluster.cli("up", "--fleet", "0", "--full", "0", "--behind-login", str(len(NODES)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(3 started)" in proc.stdout  # the login node and both hosts behind it
    _, hosts = drift(inventory(cluster, tmp_path / "inv.yaml"), *NODES)
    for name in NODES:
        assert not {f["id"] for f in hosts[name]} & {"host.unreachable", "host.key_changed"}
