"""Checks over time (gpurig/checks/over_time.py, kept by gpurig/node/over_time.py): an RDMA
port's counter increase, symbol-error rate and flaps between two runs, and a reboot-asking Xid or
SXid back after the reboot.

The pure judging on readings of the recorded sysfs tree (tests/fixtures/fabric, read by the
Fabric fact's own command) and on recorded kernel logs (tests/fixtures/gpu); the real node
contract (`gpurig drift --local --mode healthcheck`) twice over the recorded tree mounted on
/sys/class in a mount namespace of its own, its counters advanced between the two runs."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from gpurig.checks import over_time
from gpurig.checks.judge import Probed
from gpurig.facts.gpurig_fabric import Fabric
from gpurig.facts.gpurig_nvidia import KernelLog
from gpurig.facts.round_trip import read_key
from gpurig.node import ack as acks
from gpurig.node import over_time as kept_over_time
from gpurig.spec.finding import Finding
from gpurig.spec.inventory import Host, SshSettings
from tests.unit import test_fabric
from tests.unit.gpu_fixtures import recorded_output

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "tests" / "fixtures" / "gpu"
# Xid 79 (fallen off the bus, RESTART_BM) and the fatal SXid 20034 on an NVSwitch system.
XID_79_SXID_20034 = GPU / "kernel_sxid_20034_with_xid_79_dmesg.txt"
PORT = "mlx5_0/1"
HOUR = 3600.0
PORTS = ["hfi1_0/1", "mlx4_0/1", "mlx4_0/2", "mlx5_0/1"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if os.geteuid() != 0:
        pytest.fail("mounting the recorded sysfs tree over /sys/class needs root")
    fact = Fabric()
    tree = test_fabric.recorded_tree(tmp_path_factory.mktemp("sysfs"))
    return fact.process(test_fabric.run_fact(fact.command(), tree))


def advanced(reading: Mapping[str, Any], state: str | None = None, **counters: int) -> dict:
    """The recorded reading with mlx5_0 port 1's counters raised by `counters` (and its state
    set), as the kernel would show them later."""
    later = copy.deepcopy(dict(reading))
    port = later["hcas"]["mlx5_0"]["ports"]["1"]
    for name, by in counters.items():
        port["counters"][name] += by
    if state is not None:
        port["state"] = state
    return later


def ids(findings: list[Finding]) -> list[str]:
    return [f.id for f in findings]


def test_the_first_reading_after_boot_has_no_rate_and_never_a_finding(recorded: dict) -> None:
    first = over_time.fabric_rates(None, "boot-1", 100.0, recorded)
    assert first.findings == []
    assert first.notes == ["fabric rates: no rate yet, the first reading since boot (4 RDMA ports)"]
    assert sorted(first.kept["ports"]) == PORTS
    # A record of another boot is the same as none: the counters started again at boot.
    again = over_time.fabric_rates(first.kept, "boot-2", 50.0, advanced(recorded, link_downed=4))
    assert again.findings == [] and again.notes == first.notes


def test_symbol_errors_are_judged_as_a_rate_never_scaled_up(recorded: dict) -> None:
    kept = over_time.fabric_rates(None, "b", 0.0, recorded).kept
    # 60 in ten minutes would be 360 an hour if scaled up: not judged so, the hour is not over.
    assert (
        over_time.fabric_rates(kept, "b", 600.0, advanced(recorded, symbol_error=60)).findings == []
    )
    # Past the hour's allowance within the hour: an error however short the window.
    [fired] = over_time.fabric_rates(
        kept, "b", 600.0, advanced(recorded, symbol_error=121)
    ).findings
    assert (fired.id, fired.severity, fired.subject) == (
        "fabric.symbol_error_rate", "error", f"RDMA port {PORT}"
    )  # fmt: skip
    assert "over the 120 an hour" in fired.message
    # Over two hours: 240 is the allowance, 241 is over it.
    assert (
        over_time.fabric_rates(kept, "b", 2 * HOUR, advanced(recorded, symbol_error=240)).findings
        == []
    )
    late = over_time.fabric_rates(kept, "b", 2 * HOUR, advanced(recorded, symbol_error=241))
    assert ids(late.findings) == ["fabric.symbol_error_rate"]
    # A window over, the next one starts from this reading.
    assert late.kept["ports"][PORT]["base"]["at"] == 2 * HOUR


@pytest.mark.parametrize(
    "counter", ["link_downed", "excessive_buffer_overrun_errors", "local_link_integrity_errors"]
)
def test_any_increase_is_an_error_for_the_boot(recorded: dict, counter: str) -> None:
    kept = over_time.fabric_rates(None, "b", 0.0, recorded).kept
    grew = over_time.fabric_rates(kept, "b", 60.0, advanced(recorded, **{counter: 1}))
    [fired] = grew.findings
    assert (fired.id, fired.severity) == ("fabric.link_errors", "error")
    assert f"{counter} grew by 1" in fired.message
    # No further increase: still an error this boot (the node stays drained, as for an Xid).
    still = over_time.fabric_rates(grew.kept, "b", 120.0, advanced(recorded, **{counter: 1}))
    assert ids(still.findings) == ["fabric.link_errors"]


def test_cleared_counters_start_the_port_again(recorded: dict) -> None:
    kept = over_time.fabric_rates(None, "b", 0.0, advanced(recorded, link_downed=5)).kept
    cleared = over_time.fabric_rates(kept, "b", 60.0, recorded)
    assert cleared.findings == []
    assert cleared.notes == [f"fabric rates: no rate yet for {PORT} (counters cleared)"]


def test_a_state_change_is_a_flap_warning_with_its_count(recorded: dict) -> None:
    kept = over_time.fabric_rates(None, "b", 0.0, recorded).kept
    down = over_time.fabric_rates(kept, "b", 60.0, advanced(recorded, state="DOWN"))
    [flap] = down.findings
    assert (flap.id, flap.severity) == ("fabric.port_flap", "warn")
    assert (
        "from ACTIVE to DOWN since the last run (state changes seen since boot: 1)" in flap.message
    )
    up = over_time.fabric_rates(down.kept, "b", 120.0, recorded)
    assert "(state changes seen since boot: 2)" in up.findings[0].message
    assert over_time.fabric_rates(up.kept, "b", 180.0, recorded).findings == []


def kernel_log(path: Path) -> dict[str, Any]:
    return acks.parse_log(recorded_output(path))


def test_reboot_asking_codes_are_the_catalogs() -> None:
    codes = over_time.reboot_codes(kernel_log(XID_79_SXID_20034))
    assert sorted(codes) == ["SXid 20034", "Xid 79"]
    assert len(codes["SXid 20034"]) == 8
    # Xid 119 (GSP RPC timeout) asks for a GPU reset, not a reboot.
    assert over_time.reboot_codes(kernel_log(GPU / "kernel_xid_119_gsp_rpc_timeout.txt")) == {}


def test_a_code_back_after_its_reboot_is_the_hardwares_case_not_another_reboot() -> None:
    log = kernel_log(XID_79_SXID_20034)
    left, findings = over_time.after_reboot(log, ["Xid 79"])
    [fired] = findings
    assert (fired.id, fired.severity, fired.remediation) == (
        "gpu.fault_after_reboot",
        "error",
        "rma",
    )
    assert fired.fix.endswith("hardware: open a case with the provider / RMA, with the evidence "
                              "in the finding; a reboot will not clear it")  # fmt: skip
    assert "is logged again on this one (1 line): the reboot did not clear it" in fired.message
    assert left["xids"] == [] and left["fallen_off_bus"] == []  # not asked to reboot again
    assert left["sxids"] == log["sxids"]  # the SXid did not ask before: judged as always
    assert over_time.after_reboot(log, []) == (log, [])


def _contract_over_time(log: dict, boot: str, state_dir: Path) -> list[str]:
    """The contracts' judging over time of a read holding kernel log `log`, on boot `boot`."""
    host = Host("node-1", "localhost", SshSettings(), (), {}, "test", 1)
    probed = Probed(host, {read_key(KernelLog, {}): log})
    _, findings, _ = kept_over_time.judged(probed, {}, boot=lambda: boot, state_dir=state_dir)
    return ids(findings)


def test_the_record_across_two_boots(tmp_path: Path) -> None:
    """The boot id is the read's edge here: the sandbox's full hosts are containers, which share
    the machine's kernel and so its boot id; a boot is stood for by another id."""
    state = tmp_path / "state"
    log = kernel_log(XID_79_SXID_20034)
    assert _contract_over_time(log, "boot-1", state) == []  # asked for a reboot: recorded
    assert _contract_over_time(log, "boot-1", state) == []  # the same boot: nothing new
    record = acks.load(state)
    assert record is not None and record.asked == ("SXid 20034", "Xid 79")
    assert (state.stat().st_mode & 0o777, (state / "ack.json").stat().st_mode & 0o777) == (
        0o700, 0o600
    )  # fmt: skip
    assert _contract_over_time(log, "boot-2", state) == ["gpu.fault_after_reboot"] * 2
    quiet = {**log, "xids": [], "sxids": [], "fallen_off_bus": []}
    assert _contract_over_time(quiet, "boot-3", state) == []  # boot-2 asked; boot-3 is clean
    assert _contract_over_time(log, "boot-4", state) == []  # boot-3 asked for nothing


def test_an_acknowledgement_keeps_the_reboot_record() -> None:
    had = acks.asked_for_reboot(acks.on_boot(None, "b1"), ["Xid 79"])
    rolled = acks.acknowledge(had, "b2", {"gpu.xid": 5.0}, ["gpu.xid"], 1.0)
    assert (rolled.before, rolled.upto) == (("Xid 79",), {"gpu.xid": 5.0})
    assert acks.from_text(acks.as_text(rolled)) == rolled


# One case per id: the findings it fires from (tests/unit/test_checks.py's domain table).
def _fires_symbol(reading: dict) -> list[Finding]:
    kept = over_time.fabric_rates(None, "b", 0.0, reading).kept
    return over_time.fabric_rates(kept, "b", HOUR, advanced(reading, symbol_error=500)).findings


def _fires_link(reading: dict) -> list[Finding]:
    kept = over_time.fabric_rates(None, "b", 0.0, reading).kept
    return over_time.fabric_rates(kept, "b", 60.0, advanced(reading, link_downed=1)).findings


def _fires_flap(reading: dict) -> list[Finding]:
    kept = over_time.fabric_rates(None, "b", 0.0, reading).kept
    return over_time.fabric_rates(kept, "b", 60.0, advanced(reading, state="INIT")).findings


def _fires_after_reboot(_reading: dict) -> list[Finding]:
    return over_time.after_reboot(kernel_log(XID_79_SXID_20034), ["SXid 20034"])[1]


CASES: dict[str, Callable[[dict], list[Finding]]] = {
    "fabric.symbol_error_rate": _fires_symbol,
    "fabric.link_errors": _fires_link,
    "fabric.port_flap": _fires_flap,
    "gpu.fault_after_reboot": _fires_after_reboot,
}


def test_every_id_has_a_case_that_fires_it(recorded: dict) -> None:
    assert set(CASES) == set(over_time.IDS)
    for finding_id, case in CASES.items():
        assert finding_id in ids(case(recorded)), finding_id


def _healthcheck(tree: Path, runtime: Path, spec: Path, out: Path) -> str:
    """The real health check contract (a process of its own) over `tree` mounted on /sys/class
    in a mount namespace of its own, keeping its records in `runtime`; its stderr."""
    mount = f'mount --bind {tree} /sys/class && exec "$0" "$@"'
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, sys.executable,
            "-m", "gpurig", "drift", "--local", "--spec", str(spec), "--mode", "healthcheck",
            "--format", "json", "--output", str(out)]  # fmt: skip
    env = {**os.environ, "GPURIG_RUNTIME_DIR": str(runtime)}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert out.exists(), done.stderr
    return done.stdout + done.stderr


def _findings(out: Path) -> dict[str, dict[str, Any]]:
    [host] = json.loads(out.read_text())["hosts"]
    return {f["id"]: f for f in host["findings"] if f["id"] in over_time.IDS}


def test_the_contract_twice_over_the_recorded_tree_with_its_counters_advanced(
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.fail("mounting the recorded sysfs tree over /sys/class needs root")
    tree = test_fabric.recorded_tree(tmp_path / "sysfs")
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    spec = tmp_path / "spec.yaml"
    spec.write_text("core_dumps: enabled\n")
    said = _healthcheck(tree, runtime, spec, tmp_path / "first.json")
    assert "gpurig healthcheck: fabric rates: no rate yet, the first reading since boot" in said
    assert _findings(tmp_path / "first.json") == {}
    assert (runtime / "fabric-rates.json").stat().st_mode & 0o777 == 0o600
    # The port as the kernel would show it after losing its link twice and 900 symbol errors.
    port = tree / "infiniband" / "mlx5_0" / "ports" / "1"
    (port / "counters" / "link_downed").write_text("2\n")
    (port / "counters" / "symbol_error").write_text("900\n")
    (port / "state").write_text("1: DOWN\n")
    said = _healthcheck(tree, runtime, spec, tmp_path / "second.json")
    found = _findings(tmp_path / "second.json")
    assert sorted(found) == ["fabric.link_errors", "fabric.port_flap", "fabric.symbol_error_rate"]
    assert found["fabric.link_errors"]["severity"] == "error"
    assert "link_downed grew by 2" in found["fabric.link_errors"]["message"]
    assert "over the 120 an hour" in found["fabric.symbol_error_rate"]["message"]
    assert found["fabric.port_flap"]["severity"] == "warn"
    assert "(state changes seen since boot: 1)" in found["fabric.port_flap"]["message"]
    assert "no rate yet" not in said


def _fabric_probed(reading: dict) -> Probed:
    host = Host("node-1", "localhost", SshSettings(), (), {}, "test", 1)
    return Probed(host, {read_key(Fabric, {}): reading})


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"boot_id": "b", "ports": []}',
        '{"boot_id": "b", "ports": {"mlx5_0/1": {"state": "ACTIVE"}}}',
        '{"boot_id": "b", "ports": {}, "extra": 1}',
    ],
)
def test_an_odd_fabric_record_reads_as_none(recorded: dict, tmp_path: Path, text: str) -> None:
    with pytest.raises(ValueError):
        kept_over_time.fabric_from_text(text)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    (runtime / kept_over_time.FABRIC_FILE).write_text(text)
    found, notes = kept_over_time.fabric(_fabric_probed(recorded), "b", 1.0, runtime)
    assert found == [] and "no rate yet, the first reading since boot" in notes[0]


def test_a_record_another_account_could_write_is_not_trusted(
    recorded: dict, tmp_path: Path
) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    probed = _fabric_probed(recorded)
    kept_over_time.fabric(probed, "b", 0.0, runtime)
    (runtime / kept_over_time.FABRIC_FILE).chmod(0o666)
    _, notes = kept_over_time.fabric(
        _fabric_probed(advanced(recorded, link_downed=1)), "b", 9.0, runtime
    )
    assert "no rate yet, the first reading since boot" in notes[0]


def test_a_held_lock_keeps_nothing_and_says_so(recorded: dict, tmp_path: Path) -> None:
    from gpurig.node import record

    runtime = tmp_path / "run"
    with record.locked(runtime, kept_over_time.FABRIC_FILE):
        found, notes = kept_over_time.fabric(_fabric_probed(recorded), "b", 0.0, runtime)
    assert found == [] and notes[0].startswith("fabric rates: not judged, nothing kept (")
    assert not (runtime / kept_over_time.FABRIC_FILE).exists()
