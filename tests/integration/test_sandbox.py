"""The sandbox: real SSH hosts on this machine, reached with strict host key checking."""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from pathlib import Path

import pytest
import testinfra
import yaml
from support import FLEET, FULL, Sandbox, run_verify, write_inventory

from gpurig.remote.converge import converge
from gpurig.sandbox.leftovers import leftovers
from gpurig.sandbox.services import SERVICES


def status_rows(box: Sandbox) -> tuple[int, list[dict]]:
    proc = box.cli("status", "--json")
    return proc.returncode, json.loads(proc.stdout)


def test_every_host_is_up_with_its_own_identity(sandbox: Sandbox):
    rc, rows = status_rows(sandbox)
    assert rc == 0, rows
    assert {r["kind"] for r in rows} == {"service", "fleet", "full"}
    assert len(rows) == len(SERVICES) + FLEET + FULL and all(r["up"] for r in rows)
    hosts = sandbox.state.hosts.values()
    assert len({h.address for h in hosts}) == len(hosts)
    assert len({h.host_key for h in hosts}) == len(hosts)
    for rec in hosts:
        remote = testinfra.get_host(f"ssh://{rec.name}", ssh_config=str(sandbox.paths.ssh_config))
        assert remote.check_output("hostname") == rec.name
        assert remote.user().name == "root"


def test_full_host_boots_systemd_and_fleet_host_runs_sshd_as_init(sandbox: Sandbox):
    config = str(sandbox.paths.ssh_config)
    full = testinfra.get_host("ssh://full-1", ssh_config=config)
    assert full.check_output("systemctl is-system-running --wait") in {"running", "degraded"}
    fleet = testinfra.get_host("ssh://fleet-001", ssh_config=config)
    assert "sshd" in fleet.check_output("cat /proc/1/cmdline")


def test_up_again_changes_nothing_and_can_grow(sandbox: Sandbox):
    before = {name: (h.pid, h.started, h.host_key) for name, h in sandbox.state.hosts.items()}
    proc = sandbox.up()
    assert proc.returncode == 0, proc.stderr
    assert "(0 started)" in proc.stdout
    proc = sandbox.up(fleet=FLEET + 1)
    assert proc.returncode == 0, proc.stderr
    after = sandbox.state.hosts
    assert f"fleet-{FLEET + 1:03d}" in after
    assert {
        name: (h.pid, h.started, h.host_key) for name, h in after.items() if name in before
    } == before


def test_registry_serves_the_v2_api(sandbox: Sandbox):
    with urllib.request.urlopen(f"http://{sandbox.registry}/v2/", timeout=5) as resp:
        assert resp.status == 200


def test_converge_over_ssh_then_zero_changes_then_verify(sandbox: Sandbox, tmp_path: Path):
    # full-2 and full-3 belong to the engine tests (test_converge.py).
    names = [h.name for h in sandbox.state.hosts.values() if h.name not in ("full-2", "full-3")]
    inventory = write_inventory(sandbox, tmp_path / "inv.yaml", {"full-1": {"packages": ["tmux"]}})
    first = converge([inventory], limit=names)
    assert first.returncode == 0, first.stderr
    assert not first.errors
    assert set(first.changed["Packages | Install tmux"]) == {"full-1"}
    second = converge([inventory], limit=names)
    assert second.returncode == 0, second.stderr
    assert second.change_count == 0, second.changed
    verify = run_verify(sandbox, names)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert f"{2 * len(names)} passed" in verify.stdout  # the core-dump checks, on every host
    full = testinfra.get_host("ssh://full-1", ssh_config=str(sandbox.paths.ssh_config))
    assert full.package("tmux").is_installed


def test_a_changed_host_key_is_refused(sandbox: Sandbox, tmp_path: Path):
    inventory = yaml.safe_load(sandbox.paths.inventory.read_text())
    hosts = inventory["hosts"]
    hosts["fleet-001"]["ssh"]["host_key"] = hosts["fleet-002"]["ssh"]["host_key"]
    path = tmp_path / "swapped.yaml"
    path.write_text(yaml.safe_dump(inventory))
    result = converge([path], limit=["fleet-001"])
    assert result.returncode != 0
    assert "fleet-001" in result.stderr
    assert not result.changed


@pytest.mark.disruptive
def test_killed_processes_are_recovered_by_up(sandbox: Sandbox):
    state = sandbox.state
    victim = state.hosts["fleet-002"]
    os.kill(victim.pid, signal.SIGKILL)
    os.kill(state.services["registry"][0], signal.SIGKILL)
    rc, rows = status_rows(sandbox)
    assert rc == 1
    assert {r["name"] for r in rows if not r["up"]} == {"registry", "fleet-002"}
    proc = sandbox.up()
    assert proc.returncode == 0, proc.stderr
    rc, rows = status_rows(sandbox)
    assert rc == 0, rows
    assert sandbox.state.hosts["fleet-002"].host_key == victim.host_key


@pytest.mark.disruptive
def test_down_leaves_nothing_and_up_rebuilds(sandbox: Sandbox):
    state = sandbox.state
    proc = sandbox.down()
    assert proc.returncode == 0, proc.stderr
    assert leftovers(sandbox.top, state) == []
    proc = sandbox.up()
    assert proc.returncode == 0, proc.stderr
    assert status_rows(sandbox)[0] == 0
