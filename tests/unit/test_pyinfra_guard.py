"""gpurig's guards on pyinfra's run, through pyinfra's real @local connector (a real shell):
no sudo prompt whatever a command prints, undecodable and endless output read and bounded."""

from __future__ import annotations

import getpass
import socket
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.connectors import util

from gpurig.deploys.lock import first_line
from gpurig.read import bounds
from gpurig.remote import pyinfra_guard


@pytest.fixture
def local_host(monkeypatch: pytest.MonkeyPatch) -> Any:
    def no_prompt(*_args: Any, **_kwargs: Any) -> str:
        raise AssertionError("pyinfra asked for a password")

    monkeypatch.setattr(getpass, "getpass", no_prompt)
    monkeypatch.setattr(util, "getpass", no_prompt)
    pyinfra_guard.install()
    inventory = Inventory((["@local"], {}))
    State(inventory, Config())
    host = inventory.get_host("@local")
    host.connect()
    return host


def test_a_command_printing_sudos_password_line_gets_no_prompt(local_host: Any) -> None:
    line = "sudo: a password is required"
    ok, output = local_host.run_shell_command(f"echo '{line}' >&2; exit 1")
    assert not ok and output.stderr_lines == [line]
    assert local_host.connector_data[pyinfra_guard.SUDO_REFUSED] is True


def test_a_successful_command_never_marks_the_host(local_host: Any) -> None:
    local_host.connector_data.pop(pyinfra_guard.SUDO_REFUSED, None)
    ok, _ = local_host.run_shell_command("echo 'sudo: a password is required'")
    assert ok and pyinfra_guard.SUDO_REFUSED not in local_host.connector_data


def test_undecodable_bytes_and_a_huge_line_are_read_with_replacement(local_host: Any) -> None:
    """A byte 0xff killed pyinfra's reader (strict UTF-8); the rest of the output then sat in
    the channel and a bigger one blocked the command for ever."""
    command = "printf '\\377 held\\n'; head -c 9437184 /dev/zero | tr '\\0' x; echo; echo end"
    ok, output = local_host.run_shell_command(command, _timeout=60)
    lines = output.stdout_lines
    assert ok and lines[0] == "\ufffd held" and lines[-1] == "end"
    # The 9 MiB line arrives in pieces of at most MAX_LINE_BYTES.
    assert max(len(line) for line in lines) <= pyinfra_guard.MAX_LINE_BYTES
    assert sum(len(line) for line in lines[1:-1]) == 9437184


def test_output_past_the_bound_is_drained_then_refused(
    local_host: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(bounds, "MAX_OUTPUT_BYTES", 1 << 20)
    done = tmp_path / "done"
    with pytest.raises(bounds.OutputFlood, match="1048576 bytes on stdout"):
        local_host.run_shell_command(f"yes | head -c 8388608; touch {done}", _timeout=60)
    assert done.exists()  # the command finished: what it printed past the bound was drained
    assert "refused" in local_host.connector_data.pop(pyinfra_guard.FLOODED)


def test_a_flood_of_empty_lines_is_bounded_in_memory_and_fails_the_host(
    local_host: Any, faults: Any
) -> None:
    """64 MiB of newlines passed the byte bound as 64 Mi lines of ~100 bytes each: 13 GB. Here
    4 Mi empty lines on each stream (a sixteenth of that, 0.9 GB on main) must cost no more
    than the byte bound itself, and fail the host with its reason."""
    flood = "head -c 4194304 /dev/zero | tr '\\0' '\\n'"
    refused: OSError | None = None
    tracemalloc.start()
    try:
        local_host.run_shell_command(f"{flood}; {flood} >&2", _timeout=120)
    except OSError as exc:
        refused = exc
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    print(f"peak traced memory: {peak / (1 << 20):.1f} MiB")
    faults.plant(refused=isinstance(refused, bounds.OutputFlood), ran_as_root=False)
    assert peak < 64 << 20, f"{peak >> 20} MiB kept for a flood of empty lines"
    assert isinstance(refused, bounds.OutputFlood)
    assert f"{bounds.MAX_OUTPUT_LINES} lines" in str(refused)
    assert "on stdout and stderr" in str(refused)
    assert local_host.connector_data.pop(pyinfra_guard.FLOODED) == str(refused)


def test_drift_reports_a_flood_as_that_hosts_unreadable_state() -> None:
    from gpurig.checks.judge import connect_failure
    from gpurig.spec.inventory import load_inventory_text

    text = "version: 1\nhosts:\n  a100-1: {address: 203.0.113.7}\n"
    [host] = load_inventory_text(text, "fleet.yaml").hosts
    why = f"{bounds.FLOOD_PREFIX} 262144 lines or 67108864 bytes on stdout: refused"
    finding = connect_failure(host, why)
    assert finding.id == "state.unreadable" and finding.severity == "error"
    assert finding.actual == why


def test_the_lock_answer_is_one_short_line_within_a_timeout() -> None:
    """The converge lock's reader over a real socket: bytes, bounded, never blocking."""
    ours, theirs = socket.socketpair()
    ours.settimeout(0.5)
    theirs.sendall(b"\xff held\nmore")
    assert first_line(ours) == b"\xff held"
    silent, _peer = socket.socketpair()
    silent.settimeout(0.5)
    assert first_line(silent) is None  # silence: no answer, no hang
    endless, source = socket.socketpair()
    endless.settimeout(0.5)
    writer = threading.Thread(target=source.sendall, args=(b"x" * 4096,))
    writer.start()
    assert first_line(endless) == b"x" * 64  # at most a short line is read
    source.close()
    writer.join()


def test_drift_says_sudo_wanted_a_password_not_that_the_host_is_unreachable() -> None:
    from gpurig.checks.judge import SUDO_PASSWORD, Probed, connect_failure, report
    from gpurig.spec.inventory import load_inventory_text

    text = "version: 1\nhosts:\n  a100-1: {address: 203.0.113.7, ssh: {user: alice}}\n"
    [host] = load_inventory_text(text, "fleet.yaml").hosts
    finding = connect_failure(host, SUDO_PASSWORD)
    assert finding.id == "host.sudo_password" and finding.severity == "error"
    assert "never sends one" in finding.message and "scope: user" in finding.fix
    assert connect_failure(host, "timed out").id == "host.unreachable"
    # The host answered SSH: reachable, not read (field note: `reachable: false`).
    assert report(Probed(host, None, SUDO_PASSWORD)).reachable
    assert not report(Probed(host, None, "timed out")).reachable
