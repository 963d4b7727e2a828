"""`gpurig drift` end to end without the sandbox: refusals before connecting, an unreachable
loopback port, and the real one-command read through pyinfra's fact machinery on its @local
connector."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from click.testing import CliRunner

from gpurig.cli.main import main
from gpurig.remote.drift import run_drift
from gpurig.spec.inventory import Host, SshSettings
from gpurig.spec.model import normalise

BAD = Path(__file__).parent / "bad_inventories" / "size-without-unit.yaml"


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def inventory(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "version: 1\nhosts:\n"
        f"  dead:\n    address: 127.0.0.1\n    ssh: {{port: {port}, connect_timeout: 5}}\n"
        "  also-dead:\n    address: 127.0.0.1\n"
        f"    ssh: {{port: {port}, connect_timeout: 5}}\n"
    )
    return path


def test_unreachable_host_is_a_finding_and_exit_1(tmp_path: Path) -> None:
    started = time.monotonic()
    args = ["drift", str(inventory(tmp_path, free_port())), "--format", "json", "--limit", "dead"]
    result = CliRunner().invoke(main, args)
    assert time.monotonic() - started < 5
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    [host] = doc["hosts"]
    assert (host["name"], host["reachable"]) == ("dead", False)
    assert [f["id"] for f in host["findings"]] == ["host.unreachable"]


def test_output_file_gets_the_report(tmp_path: Path) -> None:
    out = tmp_path / "drift.md"
    args = ["drift", str(inventory(tmp_path, free_port())), "--format", "markdown"]
    result = CliRunner().invoke(main, [*args, "--output", str(out)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert out.read_text().startswith("## gpurig drift: drift on 2 of 2 hosts")


def test_invalid_inventory_exits_2_before_connecting() -> None:
    result = CliRunner().invoke(main, ["drift", str(BAD)])
    assert result.exit_code == 2
    assert "expected a size" in result.stderr
    assert result.stdout == ""


def test_unknown_limit_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["drift", str(inventory(tmp_path, 1)), "--limit", "nope"])
    assert result.exit_code == 2
    assert "no host named nope" in result.stderr


def test_real_read_through_pyinfra_local_connector(tmp_path: Path) -> None:
    """The fact's command and process() as pyinfra runs them, on this machine."""
    spec = {"engine": "none", "checks": {"disk_free_min": "1000t"}, "core_dumps": "enabled"}
    local = Host("@local", "localhost", SshSettings(), (), normalise(spec), "test", 1)
    [report] = run_drift([local], tmp_path)
    assert report.reachable
    assert [f.id for f in report.findings] == ["disk.free"]


def test_a_missing_private_key_file_is_that_hosts_unreachable_reason(tmp_path: Path) -> None:
    """The inventory's key path does not exist here (a CI runner): that host is unreachable
    with the reason, the others are read, and the report is written."""
    path = inventory(tmp_path, free_port())
    missing = tmp_path / "no-such-key"
    path.write_text(
        path.read_text().replace(
            "connect_timeout: 5}\n  also", f"connect_timeout: 5, key: {missing}}}\n  also", 1
        )
    )
    out = tmp_path / "drift.json"
    result = CliRunner().invoke(
        main, ["drift", str(path), "--format", "json", "--output", str(out)]
    )
    assert result.exit_code == 1, result.output
    hosts = {h["name"]: h for h in json.loads(out.read_text())["hosts"]}
    assert [f["id"] for f in hosts["dead"]["findings"]] == ["host.unreachable"]
    assert f"No such private key file: {missing}" in hosts["dead"]["findings"][0]["actual"]
    assert [f["id"] for f in hosts["also-dead"]["findings"]] == ["host.unreachable"]
    assert "No such private key file" not in hosts["also-dead"]["findings"][0]["actual"]
