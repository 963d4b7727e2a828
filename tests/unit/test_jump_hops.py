"""Hosts behind a login node (`ssh.jump`), over real SSH connections to loopback servers: a
login node that forwards to names only it knows, and a host behind it that refuses logins
(so a host.unreachable with an authentication error means both hops and both keys passed).
Each hop's changed key is refused and named; one login serves every host behind the node and
closes with the last of them. The sandbox test (tests/integration/test_jump.py) logs in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from pyinfra.api.connectors import get_all_connectors

from gpurig.cli.main import main
from gpurig.remote.converge import converge
from gpurig.remote.drift import run_drift
from gpurig.remote.jump import LOGINS, JumpConnector
from gpurig.remote.pyinfra_inventory import JUMP_CONNECTOR
from gpurig.spec.hostkeys import changed_message
from gpurig.spec.inventory import load_inventory
from tests.unit.ssh_server import LoginNodeLog, generate_key, login_node, ssh_server

NODES = [f"node-{i}" for i in range(1, 6)]


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    top = tmp_path_factory.mktemp("keys")
    return {name: generate_key(top / name) for name in ("login", "node", "client", "other")}


def public(path: Path) -> str:
    return " ".join(Path(f"{path}.pub").read_text().split()[:2])


@dataclass
class Cluster:
    """A login node on loopback and, behind it, NODES (all one loopback server)."""

    login_port: int
    seen: LoginNodeLog
    keys: dict[str, Path]

    def inventory(self, path: Path, login_key: str = "login", node_key: str = "node") -> Path:
        """NODES through the login node, its key and theirs recorded as given."""
        jump = {"address": "127.0.0.1", "port": self.login_port,
                "host_key": public(self.keys[login_key])}  # fmt: skip
        doc = {
            "version": 1,
            "defaults": {"ssh": {"user": "root", "key": str(self.keys["client"])}},
            "groups": {"cluster": {"ssh": {"jump": jump}}},
            "hosts": {
                name: {
                    "address": f"{name}.internal",
                    "ssh": {"host_key": public(self.keys[node_key])},
                    "groups": ["cluster"],
                    "spec": {"engine": "none", "gpu": "absent"},
                }
                for name in NODES
            },
        }
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path


@pytest.fixture
def cluster(keys: dict[str, Path]) -> Iterator[Cluster]:
    with ssh_server(keys["node"]) as node_port:
        routes = {(f"{name}.internal", 22): ("127.0.0.1", node_port) for name in NODES}
        with login_node(keys["login"], keys["client"], routes) as (port, seen):
            yield Cluster(port, seen, keys)


def test_the_connector_is_registered_under_the_name_gpurig_gives_it() -> None:
    assert get_all_connectors()[JUMP_CONNECTOR] is JumpConnector


def test_both_hops_pass_and_one_login_serves_every_host(cluster: Cluster, tmp_path: Path):
    """`gpurig drift` as a user runs it: gevent patched, the hosts probed side by side."""
    path = cluster.inventory(tmp_path / "c.yaml")
    proc = subprocess.run(
        [sys.executable, "-m", "gpurig", "drift", str(path), "--format", "json"],
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    hosts = json.loads(proc.stdout)["hosts"]
    assert [h["name"] for h in hosts] == NODES
    for host in hosts:
        [finding] = host["findings"]
        # Past both host keys, at a login the host behind refuses: a name only the login
        # node resolves was reached through it.
        assert finding["id"] == "host.unreachable", finding
        assert "Authentication error" in finding["actual"], finding
    assert cluster.seen.logins == 1  # five hosts, one login to the login node
    assert cluster.seen.open() == 0  # closed when the last host disconnected


def test_each_host_lets_go_of_the_login_node(cluster: Cluster, tmp_path: Path):
    """Each host's disconnect lets go of the shared login: the last one closes it, so nothing
    is left open after. (Run one after another, as without gevent's patch, each host logs in
    anew; once another test has patched sockets they overlap and share fewer logins.)"""
    hosts = load_inventory([cluster.inventory(tmp_path / "c.yaml")]).hosts
    reports = run_drift(hosts, tmp_path / "cache")
    assert [r.findings[0].id for r in reports] == ["host.unreachable"] * len(NODES)
    assert 1 <= cluster.seen.logins <= len(NODES)
    assert cluster.seen.open() == 0
    assert LOGINS.open_count() == 0


def test_a_changed_login_node_key_is_refused_and_named(cluster: Cluster, tmp_path: Path):
    path = cluster.inventory(tmp_path / "c.yaml", login_key="other")
    reports = run_drift(load_inventory([path]).hosts, tmp_path / "cache")
    jump = f"127.0.0.1:{cluster.login_port}"
    for report in reports:
        [finding] = report.findings
        assert finding.id == "host.key_changed"
        assert finding.message == changed_message(report.name, str(path), jump)
        assert "login node" in finding.message and "ssh.jump.host_key" in finding.expected
    assert cluster.seen.logins == 0  # refused before any login
    assert cluster.seen.open() == 0


def test_a_changed_key_behind_the_login_node_names_the_host(cluster: Cluster, tmp_path: Path):
    path = cluster.inventory(tmp_path / "c.yaml", node_key="other")
    reports = run_drift(load_inventory([path]).hosts, tmp_path / "cache")
    for report in reports:
        [finding] = report.findings
        assert finding.id == "host.key_changed"
        assert finding.message == changed_message(report.name, str(path))
    assert cluster.seen.logins >= 1  # the first hop passed; the second refused
    assert cluster.seen.open() == 0


def test_the_converge_names_the_login_node_whose_key_changed(cluster: Cluster, tmp_path: Path):
    path = cluster.inventory(tmp_path / "c.yaml", login_key="other")
    result = converge([path], limit=["node-1"])
    assert result.returncode != 0
    jump = f"127.0.0.1:{cluster.login_port}"
    assert result.messages == [changed_message("node-1", str(path), jump)]
    assert not result.changed


def onboard(path: Path, name: str) -> tuple[int, str]:
    argv = ["onboard", f"{name}.internal", "--name", name, "--inventory", str(path),
            "--group", "cluster", "--yes", "--timeout", "5"]  # fmt: skip
    result = CliRunner().invoke(main, argv)
    return result.exit_code, result.output


def test_onboard_reads_the_new_host_key_through_the_login_node(cluster: Cluster, tmp_path: Path):
    path = cluster.inventory(tmp_path / "c.yaml")
    doc = yaml.safe_load(path.read_text())
    del doc["hosts"]["node-5"]  # the new rental, named only on the login node's network
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    before = path.read_bytes()
    code, output = onboard(path, "node-5")
    assert code == 1
    # Its key was read through the login node and trusted (--yes); then the login failed.
    assert "preflight: cannot log in as root@node-5.internal:22" in output, output
    assert cluster.seen.logins == 2  # the key's fetch, then the probe
    assert path.read_bytes() == before
    assert cluster.seen.open() == 0


def test_onboard_refuses_a_changed_login_node_key(cluster: Cluster, tmp_path: Path):
    path = cluster.inventory(tmp_path / "c.yaml", login_key="other")
    before = path.read_bytes()
    code, output = onboard(path, "node-6")
    assert code == 1
    jump = f"127.0.0.1:{cluster.login_port}"
    assert f"preflight: {changed_message('node-6', str(path), jump)}" in output, output
    assert path.read_bytes() == before
    assert cluster.seen.logins == 0
