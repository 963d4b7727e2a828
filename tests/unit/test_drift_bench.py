"""The parts of benchmarks/drift_bench.py that run without a sandbox: the access files it
writes for relayed hosts, its measurement of a process tree, the relay it starts, its table."""

from __future__ import annotations

import json
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import drift_bench as bench
from benchmarks.drift_bench import Cell, Run
from gpurig.sandbox import manager
from gpurig.sandbox.keys import ensure_keypair, public_key
from gpurig.sandbox.state import HostRecord, State
from gpurig.spec.inventory import load_inventory


@pytest.fixture
def sandbox_paths(tmp_path: Path) -> manager.Paths:
    """A sandbox directory as `gpurig sandbox up` leaves it: keys and access files."""
    paths = manager.Paths(tmp_path / "sandbox")
    paths.top.mkdir()
    ensure_keypair(paths.client_key, "client")
    hosts = {}
    for i in (1, 2, 3):
        key = ensure_keypair(tmp_path / f"host-{i}", f"fleet-{i:03d}")
        name = f"fleet-{i:03d}"
        hosts[name] = HostRecord(name, "fleet", i, f"10.77.1.{i}", public_key(key))
    manager.write_access_files(paths, State(hosts=hosts))
    return paths


def test_write_fleet_points_every_client_at_the_relay_and_keeps_host_keys(
    sandbox_paths: manager.Paths, tmp_path: Path
) -> None:
    names = ["fleet-001", "fleet-003"]
    endpoints = {"fleet-001": ("127.0.0.1", 40001), "fleet-003": ("127.0.0.1", 40003)}
    spec = {"packages": ["git"], "core_dumps": "disabled"}
    fleet = bench.write_fleet(sandbox_paths, spec, endpoints, names, tmp_path / "out")

    hosts = {h.name: h for h in load_inventory([fleet.inventory]).hosts}  # gpurig accepts it
    original = {h.name: h for h in load_inventory([sandbox_paths.inventory]).hosts}
    assert sorted(hosts) == names
    for name in names:
        assert (hosts[name].address, hosts[name].ssh.port) == endpoints[name]
        assert hosts[name].ssh.host_key == original[name].ssh.host_key
        assert hosts[name].spec["packages"] == ["git"]
        assert hosts[name].spec["engine"] == "none"  # the fleet group still applies

    known = (tmp_path / "out" / "known_hosts").read_text().splitlines()
    assert known == [f"[127.0.0.1]:{endpoints[n][1]} {original[n].ssh.host_key}" for n in names]
    ini = fleet.ansible_hosts.read_text()
    assert "fleet-001 ansible_host=127.0.0.1 ansible_port=40001 " in ini
    assert "fleet-002" not in ini


@pytest.mark.skipif(not shutil.which("ssh"), reason="needs the OpenSSH client to read its config")
def test_ssh_config_as_ssh_reads_it(sandbox_paths: manager.Paths, tmp_path: Path) -> None:
    endpoints = {"fleet-002": ("127.0.0.1", 40002)}
    fleet = bench.write_fleet(sandbox_paths, {}, endpoints, ["fleet-002"], tmp_path / "out")
    argv = ["ssh", "-G", "-F", str(fleet.ssh_config), "fleet-002"]
    seen = dict(
        line.split(" ", 1) for line in subprocess.run(argv, capture_output=True, text=True,
                                                     check=True).stdout.splitlines()
    )  # fmt: skip
    assert (seen["hostname"], seen["port"]) == ("127.0.0.1", "40002")
    assert seen["stricthostkeychecking"] in ("true", "yes")
    assert seen["userknownhostsfile"] == str(tmp_path / "out" / "known_hosts")


def test_measure_counts_the_whole_process_tree() -> None:
    """CPU and memory of a grandchild count: the tree's largest process, its CPU summed."""
    child = (
        "import time; x = bytearray(64 * 2**20); end = time.process_time() + 0.2\n"
        "while time.process_time() < end: pass"
    )
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])"
    run = bench.measure([sys.executable, "-c", parent], {}, bench.exit_0)
    assert run.max_rss_kib >= 64 * 1024
    assert run.cpu >= 0.2
    assert run.seconds >= 0.2


def test_measure_refuses_a_failed_run() -> None:
    with pytest.raises(SystemExit, match="failed \\(3\\)"):
        bench.measure(["sh", "-c", "echo oops; exit 3"], {}, bench.exit_0)


def test_drift_must_reach_every_host() -> None:
    found = '{"hosts": [{"name": "a", "reachable": true, "findings": [{"id": "x"}]}]}'
    unreachable = '{"hosts": [{"name": "a", "reachable": false, "findings": []}]}'
    assert bench.drift_reached_every_host(1, found)
    assert not bench.drift_reached_every_host(1, unreachable)
    assert not bench.drift_reached_every_host(2, "")


def test_a_failed_drift_says_which_hosts_were_unreachable_and_why() -> None:
    down = {"id": "host.unreachable", "actual": "connect timed out"}
    report = {"hosts": [{"name": "a", "reachable": True, "findings": []},
                        {"name": "b", "reachable": False, "findings": [down]}]}  # fmt: skip
    assert bench.unreachable(json.dumps(report)) == "b: connect timed out\n"
    assert bench.unreachable("Traceback ...") == ""


class Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address
    server.shutdown()
    server.server_close()


def round_trip(endpoint: tuple[str, int]) -> float:
    with socket.create_connection(endpoint) as sock:
        sock.sendall(b"warm-up")
        assert sock.recv(16) == b"warm-up"
        began = time.monotonic()
        sock.sendall(b"ping")
        assert sock.recv(16) == b"ping"
        return time.monotonic() - began


def test_relayed_adds_the_round_trip_time(echo: tuple[str, int]) -> None:
    direct = {"fleet-001": echo, "fleet-002": echo}
    with bench.relayed(direct, 0, lifetime_s=60) as same:
        assert same == direct
    with bench.relayed(direct, 80, lifetime_s=60) as endpoints:
        assert endpoints["fleet-001"] == endpoints["fleet-002"]  # one target, one port
        assert endpoints["fleet-001"][0] == "127.0.0.1"
        assert 0.08 <= round_trip(endpoints["fleet-001"]) < 0.08 + 0.04


def results() -> bench.Results:
    def cell(*seconds: float) -> Cell:
        return Cell([Run(s, 0.5, 100 * 1024) for s in seconds])

    cells = {
        bench.DRIFT: cell(1.2, 1.0, 5.0),
        bench.CONVERGE: cell(3.0),
        bench.PER_FACT: cell(2.0),
        bench.ANSIBLE: Cell([], "skipped: 10 hosts at 50 ms took 400 s"),
        bench.SSH: cell(1.0),
    }
    return {(150, 10): cells}


def test_table_rows_carry_medians_ratios_counts_and_skips() -> None:
    counts = dict.fromkeys(bench.METHODS, 1.0) | {bench.CONVERGE: 23.0}
    rows = list(bench.table(results(), counts))
    assert rows[2] == "| 150 | 10 | gpurig drift | 1.20 | 1.20 | 1.0 | 50 | 100 |"
    assert rows[3] == "| 150 | 10 | no-op converge (full spec) | 3.00 | 3.00 | 23.0 | 50 | 100 |"
    assert "skipped: 10 hosts at 50 ms took 400 s" in rows[5]


def test_goals_say_which_are_met() -> None:
    lines = list(bench.goals(results()))
    assert lines == [
        "- gpurig drift, 150 ms, 10 hosts: 1.20x ssh (goal 1.3x): met",
        "- no-op converge (full spec), 150 ms, 10 hosts: 3.00x ssh (goal 2.0x): NOT met",
    ]


def test_the_baselines_run_drifts_own_reads_one_command_each(
    sandbox_paths: manager.Paths, tmp_path: Path
) -> None:
    """benchmarks/checks.py derives the baselines from gpurig's facts: one command per read
    drift makes for the fleet's spec, each of which runs (here, as on a host)."""
    import yaml

    from benchmarks.checks import checks
    from gpurig.checks.judge import drift_reads
    from gpurig.spec.model import normalise

    spec = {"packages": ["git"], "core_dumps": "disabled", "checks": {"disk_free_min": "1g"}}
    endpoints = {"fleet-001": ("127.0.0.1", 40001), "fleet-002": ("127.0.0.1", 40002)}
    fleet = bench.write_fleet(sandbox_paths, spec, endpoints, list(endpoints), tmp_path / "out")
    commands = bench.fleet_checks(fleet)
    [host, _] = load_inventory([fleet.inventory]).hosts
    assert len(commands) == len(drift_reads(normalise(host.spec))) == len(checks(host.spec))
    for command in commands:
        subprocess.run(["sh", "-c", command], check=True, capture_output=True, timeout=60)
    book = yaml.safe_load(bench.playbook(tmp_path / "checks.yml", commands).read_text())
    assert [task["shell"] for task in book[0]["tasks"]] == commands
