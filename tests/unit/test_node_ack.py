"""`gpurig ack` (gpurig/node/ack.py): kernel-log events stamped from dmesg, the record per id
and boot, the events it leaves out, the root-only file, and a contract judging the kernel log
of a recorded GPU host without the events a person acknowledged."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpurig.checks.judge import Probed
from gpurig.cli.main import main
from gpurig.facts.gpurig_nvidia import KernelLog
from gpurig.facts.round_trip import read_key
from gpurig.node import ack as acks
from gpurig.node.over_time import acknowledged
from gpurig.read.gpu_parse import kernel_stamp
from gpurig.spec.inventory import Host, SshSettings
from tests.finding_examples import STATES, replay

GPU_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gpu"
# Recorded by dmesg on an NVSwitch system: Xid 79 (fallen off the bus) and SXid 20034.
SWITCHED = "kernel_sxid_20034_with_xid_79_dmesg.txt"
HUNG = "kernel_hung-task_nvidia_rwlock_5.15_dmesg.txt"
ISO = "kernel_sxid_12028_dmesg-decode-iso.txt"


def recorded(name: str) -> str:
    return "".join(
        line for line in (GPU_FIXTURES / name).read_text().splitlines(True)
        if not line.startswith("#")
    )  # fmt: skip


def test_only_dmesg_s_own_stamp_is_seconds_since_boot() -> None:
    assert kernel_stamp("[ 6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, x") == 6781741.548779
    assert kernel_stamp("[    0.000000] Linux version") == 0.0
    assert kernel_stamp("[Mon Nov 27 03:00:00 2026] NVRM: Xid") is None  # dmesg -T
    assert kernel_stamp("2026-11-27T03:00:00,123456+00:00 NVRM: Xid") is None  # --time-format=iso
    assert kernel_stamp("Nov 27 03:00:00 host kernel: [ 12.5] NVRM") is None  # journalctl


def test_latest_per_id_from_recorded_logs() -> None:
    seen = acks.latest(acks.parse_log(recorded(SWITCHED)))
    assert set(seen) == {"gpu.fallen_off_bus", "gpu.sxid"}  # Xid 79 is the GPU off the bus
    assert seen["gpu.fallen_off_bus"] == 6781741.548783
    assert acks.latest(acks.parse_log(recorded(HUNG))) == {"gpu.hung_task": 7510.129324}
    # Wall-clock stamps only: nothing to acknowledge.
    assert acks.latest(acks.parse_log(recorded(ISO))) == {}


def test_a_record_holds_per_id_on_its_boot_only() -> None:
    first = acks.acknowledge(None, "boot-a", {"gpu.xid": 10.0, "gpu.sxid": 12.0}, ["gpu.xid"], 1.0)
    assert (first.upto, first.when) == ({"gpu.xid": 10.0}, {"gpu.xid": 1.0})
    later = acks.acknowledge(first, "boot-a", {"gpu.xid": 20.0, "gpu.sxid": 12.0},
                             acks.KERNEL_LOG_IDS, 2.0)  # fmt: skip
    assert later.upto == {"gpu.xid": 20.0, "gpu.sxid": 12.0}
    assert later.on("boot-a") == later.upto and later.on("boot-b") == {}
    rebooted = acks.acknowledge(later, "boot-b", {"gpu.sxid": 3.0}, ["gpu.sxid"], 3.0)
    assert rebooted.upto == {"gpu.sxid": 3.0}  # the old boot's record is dropped
    assert acks.from_text(acks.as_text(later)) == later
    for bad in ('{"boot_id": "b"}', '{"boot_id": 1, "upto": {}, "when": {}}',
                '{"boot_id": "b", "upto": {"disk.free": 1}, "when": {}}',
                '{"boot_id": "b", "upto": {"gpu.xid": true}, "when": {}}', "[]"):  # fmt: skip
        with pytest.raises(ValueError):
            acks.from_text(bad)


def test_unacknowledged_leaves_out_what_the_record_covers_and_never_guesses() -> None:
    log = acks.parse_log(recorded(SWITCHED))
    limits = {"gpu.fallen_off_bus": 6781741.548783}
    left = acks.unacknowledged(log, limits)
    assert left["xids"] == [] and left["fallen_off_bus"] == []
    assert left["sxids"] == log["sxids"]  # not acknowledged
    later = acks.unacknowledged(log, {"gpu.fallen_off_bus": 6781741.5})
    assert [e["xid"] for e in later["xids"]] == [79]  # logged after that point
    unstamped = {"xids": [{"xid": 48, "pci": "0000:01:00", "message": "m", "at": None}]}
    assert acks.unacknowledged(unstamped, {"gpu.xid": 1e9}) == unstamped


def state_of(text: str) -> dict:
    return {read_key(KernelLog, {}): KernelLog.parse({"gpu_lines": text})}


# A sandbox host's recorded read (no GPU), its kernel log replaced by a recorded GPU host's.
SANDBOX_STATE = STATES / "test_a_declared_inode_floor_above_the_hosts_is_drift-f71377814120.json"


def judged(text: str, limits: dict[str, float]) -> list[str]:
    """The kernel-log ids a contract reports on that read whose kernel log is `text`, after
    the acknowledgement's `limits` (gpurig.node.over_time.acknowledged, then the judge)."""
    host = Host("n1", "localhost", SshSettings(), (), {}, "node.yaml", 1)
    kept = acknowledged(Probed(host, state_of(text)), limits).state or {}
    recorded = json.loads(SANDBOX_STATE.read_text())
    recorded["state"].update(kept)
    found = replay(recorded)
    return sorted({f.id for f in found.findings} & set(acks.KERNEL_LOG_IDS))


def test_a_contract_no_longer_reports_acknowledged_events() -> None:
    text = recorded(SWITCHED)
    assert judged(text, {}) == ["gpu.fallen_off_bus", "gpu.sxid"]
    seen = acks.latest(acks.parse_log(text))
    assert judged(text, seen) == []
    # A new event after the acknowledgement is a finding again.
    again = text + "[6781800.000001] NVRM: Xid (PCI:0000:91:00): 79, GPU has fallen off the bus.\n"
    assert judged(again, seen) == ["gpu.fallen_off_bus"]


def test_the_record_is_root_s_alone(tmp_path: Path) -> None:
    ack = acks.Ack("boot-a", {"gpu.xid": 1.5}, {"gpu.xid": 100.0})
    path = Path(acks.save(ack, tmp_path / "gpurig"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert acks.load(tmp_path / "gpurig") == ack
    assert acks.load(tmp_path / "none") is None
    # Another account could have written it: not trusted, every event reported.
    path.chmod(0o622)
    assert acks.load(tmp_path / "gpurig") is None
    path.chmod(0o600)
    os.chown(path, 65534, 65534)
    assert acks.load(tmp_path / "gpurig") is None
    os.chown(path, 0, 0)
    (tmp_path / "gpurig").chmod(0o777)
    assert acks.load(tmp_path / "gpurig") is None
    with pytest.raises(PermissionError):
        acks.save(ack, tmp_path / "gpurig")
    (tmp_path / "gpurig").chmod(0o700)
    path.write_text("x" * (acks.STATE_BYTES + 10))
    assert acks.load(tmp_path / "gpurig") is None


def test_ack_command_refuses_other_ids_and_records_what_dmesg_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    for args in ([], ["disk.free"], ["--all", "gpu.xid"]):
        assert runner.invoke(main, ["ack", *args]).exit_code == 2
    # This machine's own kernel log (as root): whatever it holds, the record says it.
    monkeypatch.setattr(acks, "STATE_DIR", tmp_path / "state")
    result = runner.invoke(main, ["ack", "--all"])
    assert result.exit_code == 0, result.output
    seen = acks.latest(acks.parse_log(acks.kernel_log()))
    lines = result.stdout.splitlines()
    assert len(lines) == len(acks.KERNEL_LOG_IDS)
    record = acks.load(tmp_path / "state")
    assert record is not None and record.boot_id == acks.boot_id()
    assert set(record.upto) == set(seen) and all(record.upto[i] >= seen[i] for i in seen)


def test_current_holds_on_the_record_s_boot_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(acks, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(acks, "BOOT_ID", tmp_path / "boot_id")
    assert acks.current() == ({}, {})  # no record, no boot id: nothing left out
    acks.save(acks.Ack("boot-a", {"gpu.xid": 5.0}, {"gpu.xid": 100.0}))
    (tmp_path / "boot_id").write_text("boot-a\n")
    assert acks.current() == ({"gpu.xid": 5.0}, {"gpu.xid": 100.0})
    (tmp_path / "boot_id").write_text("boot-b\n")
    assert acks.current() == ({}, {})
