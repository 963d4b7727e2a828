"""The interconnect's parsers, reads and checks (NVSwitch SXid, hung tasks in the GPU driver,
PCIe ACS) on outputs recorded on real machines (tests/fixtures/gpu, each naming its source)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpurig.checks.interconnect import IDS, RULES, sxid_class
from gpurig.checks.rules import rules
from gpurig.data.tables import table
from gpurig.facts.gpurig_interconnect import PcieAcs
from gpurig.facts.gpurig_nvidia import KernelLog
from gpurig.read import gpu_parse
from gpurig.read.interconnect_parse import (
    acs_redirecting,
    parse_acs_controls,
    parse_hung_tasks,
    parse_sxid_lines,
)
from gpurig.spec.finding import Finding
from tests.unit import forged_kernel_log as forged
from tests.unit.fact_values import h100_vm, reader
from tests.unit.gpu_fixtures import read_fixture, run_with_stand_in

SXID_20034 = "kernel_sxid_20034_with_xid_79_dmesg.txt"
SXID_12028 = "kernel_sxid_12028_dmesg-decode-iso.txt"
HUNG_UVM = "kernel_hung-task_nvidia_uvm_4.4_dmesg.txt"
HUNG_OTHER = "kernel_hung-task_no-nvidia-frame_6.11_waybar.txt"
HUNG_RM_LOCK = "kernel_hung-task_nvidia_rwlock_5.15_dmesg.txt"
ACS_629 = "lspci-vvv_grep-ACSCtl_nccl-issue-629.txt"
ACS_NVSWITCH_PATH = "lspci-vvv_hgx-h100-half_nvswitch-path-acs-on_DERIVED.txt"
FOUR_GPUS = "nvidia-smi-L_a100-sxm4-80gb-x4_mig-on-gpu0_535.54.03.txt"


def check(spec: dict[str, Any], values: dict[type, Any]) -> list[Finding]:
    return [finding for rule in RULES for finding in rule(spec, reader(values))]


def judge(values: dict[type, Any]) -> list[Finding]:
    return check({}, values)


# The recorded state (spec, GPU facts) that fires each id: the findings catalogue's examples
# (tests/finding_examples.py) are these cases' reports.
FIRES_ON_RECORDING: dict[str, Callable[[], tuple[dict[str, Any], dict[type, Any]]]] = {
    "gpu.sxid": lambda: ({}, h100_vm(xid_lines=SXID_20034)),
    "gpu.hung_task": lambda: ({}, h100_vm(xid_lines=HUNG_UVM)),
    "pcie.acs_enabled": lambda: ({}, h100_vm(listing=FOUR_GPUS, acs=ACS_629)),
}


def test_every_interconnect_id_fires_on_a_recording() -> None:
    assert set(FIRES_ON_RECORDING) == set(IDS)
    for check_id, case in FIRES_ON_RECORDING.items():
        assert check_id in {f.id for f in check(*case())}, check_id


def read_kernel_log(text: str, tmp_path: Path) -> dict[str, Any]:
    """KernelLog's own command with a `dmesg` that prints `text`: the read's filter as it runs
    on a host, on a recorded log."""
    fact = KernelLog()
    return fact.process(run_with_stand_in(tmp_path, "dmesg", text, fact.command()))


# --- NVSwitch SXid ------------------------------------------------------------------------------


def test_sxid_lines_are_read_with_their_switch_and_code() -> None:
    events = parse_sxid_lines(read_fixture(SXID_20034))
    assert len(events) == 8
    assert {e.sxid for e in events} == {20034}
    assert {(e.switch, e.pci) for e in events} == {
        ("nvidia-nvswitch0", "0000:05:00.0"),
        ("nvidia-nvswitch1", "0000:06:00.0"),
        ("nvidia-nvswitch2", "0000:07:00.0"),
    }
    assert events[0].message == "Fatal, Link 48 LTSSM Fault Up"
    [decoded] = parse_sxid_lines(read_fixture(SXID_12028))
    assert (decoded.sxid, decoded.pci) == (12028, "0000:84:00.0")
    assert decoded.message.startswith("Data {0x000001c0")


def test_the_kernel_log_read_keeps_sxid_and_xid_lines(tmp_path: Path) -> None:
    log = read_kernel_log(read_fixture(SXID_20034), tmp_path)
    assert len(log["sxids"]) == 8
    assert [x["xid"] for x in log["xids"]] == [79]
    assert [e["pci"] for e in log["fallen_off_bus"]] == ["0000:91:00.0"]


def test_a_fatal_sxid_is_one_reboot_finding_per_nvswitch() -> None:
    findings = judge(h100_vm(xid_lines=SXID_20034))
    assert sorted(f.subject for f in findings) == [
        "NVSwitch 0000:05:00.0", "NVSwitch 0000:06:00.0", "NVSwitch 0000:07:00.0"
    ]  # fmt: skip
    for f in findings:
        assert (f.id, f.severity, f.remediation) == ("gpu.sxid", "error", "reboot")
        assert "SXid 20034 (LTSSM Fault Up, fatal)" in f.message
        assert "Fatal, Link" in f.actual and f.fix


def test_sxid_12028_stalls_nvlink_and_needs_a_reboot() -> None:
    [finding] = judge(h100_vm(xid_lines=SXID_12028))
    assert (finding.severity, finding.remediation) == ("error", "reboot")
    assert "egress nonposted PRIV error, reset" in finding.message


def test_every_sxid_category_names_a_known_remediation() -> None:
    data = table("interconnect.yaml")
    assert {c for _, c in data["sxids"].values()} == set(data["sxid_categories"])
    for category in data["sxid_categories"].values():
        assert category["remediation"] in rules()["remediations"]
        assert category["severity"] in ("error", "warn")
    # A code the table lacks: by the driver's own word, else fatal.
    assert sxid_class(26008, "Non-fatal") == ("not in the table", "corrected")
    assert sxid_class(26008, "") == ("not in the table", "fatal")


# --- Hung tasks ---------------------------------------------------------------------------------


def test_a_hung_task_in_nvidia_uvm_is_read_with_its_trace() -> None:
    [task] = parse_hung_tasks(read_fixture(HUNG_UVM))
    assert (task.task, task.pid, task.seconds) == ("nvc:[driver]", 5403, 120)
    assert task.lines[-1].endswith("uvm_gpu_retain_by_uuid+0x1e/0x40 [nvidia_uvm]")
    assert task.gpu_lines == [task.lines[-1]]


def test_a_hung_task_in_the_driver_s_lock_is_read_in_the_5_15_format() -> None:
    [task] = parse_hung_tasks(read_fixture(HUNG_RM_LOCK))
    assert (task.task, task.pid, task.seconds) == ("gdscheck", 509579, 120)
    assert len(task.lines) == 19
    assert task.gpu_lines[0].endswith("os_acquire_rwlock_read+0x35/0x50 [nvidia]")
    assert len(task.gpu_lines) == 7  # every [nvidia] frame


def test_a_hung_task_without_a_gpu_frame_is_not_the_gpu_s() -> None:
    [task] = parse_hung_tasks(read_fixture(HUNG_OTHER))
    assert (task.task, task.pid, task.seconds) == ("waybar", 1488, 122)
    assert len(task.lines) == 28
    assert task.gpu_lines == []
    assert judge(h100_vm(xid_lines=HUNG_OTHER)) == []


def test_the_kernel_log_read_keeps_the_report_not_what_came_before(tmp_path: Path) -> None:
    log = read_kernel_log(read_fixture(HUNG_UVM), tmp_path)
    [task] = log["hung_tasks"]
    assert task["gpu_lines"] and len(task["lines"]) == 14
    assert not any("__audit_syscall_entry" in line for line in task["lines"])


def test_a_task_hung_in_the_driver_is_an_error_naming_it() -> None:
    [finding] = judge(h100_vm(xid_lines=HUNG_UVM))
    assert finding.id == "gpu.hung_task"
    assert finding.subject == "task nvc:[driver] (pid 5403)"
    assert (finding.severity, finding.remediation) == ("error", "reboot")
    assert finding.actual.startswith("[  721.028170] INFO: task nvc:[driver]:5403 blocked")
    assert finding.actual.endswith("uvm_gpu_retain_by_uuid+0x1e/0x40 [nvidia_uvm]")


# --- Text an account wrote ---------------------------------------------------------------------


def test_an_sxid_or_a_hung_task_in_another_message_is_no_event() -> None:
    """A crashing program's file name in the segfault line, a command name in an audit record:
    the account's text, not the kernel's report."""
    assert parse_sxid_lines(forged.segfault(forged.SXID)) == []
    assert parse_hung_tasks(forged.segfault(forged.HUNG)) == []
    assert parse_sxid_lines(forged.FORGED) == []
    assert parse_hung_tasks(forged.FORGED) == []


@pytest.mark.parametrize("prefix", forged.PREFIXES)
def test_sxid_and_hung_task_messages_are_events_in_every_prefix(prefix: str) -> None:
    text = "".join(f"{prefix}{m}\n" for m in forged.MESSAGES)
    [sxid] = parse_sxid_lines(text)
    assert (sxid.sxid, sxid.switch, sxid.message) == (
        20034,
        "nvidia-nvswitch0",
        "Fatal, Link 1 LTSSM Fault Up",
    )
    [task] = parse_hung_tasks(text)
    assert (task.task, task.pid, task.seconds) == ("pt_nccl_watchdg", 785, 120)


@pytest.mark.parametrize("name", [SXID_20034, SXID_12028, HUNG_UVM, HUNG_RM_LOCK, HUNG_OTHER])
def test_recorded_sxids_and_hung_tasks_are_found_among_forged_lines(name: str) -> None:
    text = read_fixture(name)
    mixed = forged.FORGED + text
    assert parse_sxid_lines(mixed) == parse_sxid_lines(text)
    assert [(t.task, t.pid) for t in parse_hung_tasks(mixed)] == [
        (t.task, t.pid) for t in parse_hung_tasks(text)
    ]


def test_the_kernel_log_read_finds_no_event_in_forged_lines(tmp_path: Path) -> None:
    """Through the read's own filter: nothing of the forged lines, the recorded events kept."""
    log = read_kernel_log(forged.FORGED, tmp_path)
    assert log == {"xids": [], "fallen_off_bus": [], "sxids": [], "hung_tasks": []}
    recorded = read_fixture(SXID_20034) + read_fixture(
        "kernel_fallen-off-bus_no-xid_570.158.01_dmesg.txt"
    )
    log = read_kernel_log(forged.FORGED + recorded + forged.CONTINUED + "\n", tmp_path)
    assert len(log["sxids"]) == 8
    assert [x["xid"] for x in log["xids"]] == [79]
    assert [e["pci"] for e in log["fallen_off_bus"]] == ["0000:91:00.0", "0000:b3:00.0"]


def test_only_a_probe_messages_own_lines_continue_it(tmp_path: Path) -> None:
    """A line indented under the probe-time message that names a GPU is that message's only
    where it follows it in the log: the read's filter passes indented lines only with the line
    they continue, so a program's file name cannot go on a message the filter kept."""
    assert gpu_parse.parse_fallen_off_bus(forged.AFTER_A_PROBE) == []
    assert read_kernel_log(forged.AFTER_A_PROBE, tmp_path)["fallen_off_bus"] == []
    recorded = read_fixture("kernel_fallen-off-bus_no-xid_570.158.01_dmesg.txt")
    log = read_kernel_log(forged.AFTER_A_PROBE + recorded + forged.AFTER_A_PROBE, tmp_path)
    assert [e["pci"] for e in log["fallen_off_bus"]] == ["0000:b3:00.0"]
    # with no prefix (dmesg -t), the message's lines are not indented
    unstamped = "".join(line.strip() + "\n" for line in recorded.splitlines()[:3])
    log = read_kernel_log(forged.AFTER_A_PROBE + unstamped, tmp_path)
    assert [e["pci"] for e in log["fallen_off_bus"]] == ["0000:b3:00.0"]


def test_forged_kernel_log_lines_are_no_finding() -> None:
    """The node checks (gpu.py and interconnect.py) on a kernel log of forged lines only: the
    healthy H100 VM stays healthy (no gpu.xid, gpu.fallen_off_bus, gpu.sxid, gpu.hung_task)."""
    from gpurig.checks import gpu as gpu_checks

    values = h100_vm(xid_lines=forged.FORGED)
    assert gpu_checks.check({}, reader(values)) == []
    assert judge(values) == []


# --- PCIe ACS -----------------------------------------------------------------------------------


def test_acs_controls_are_read_from_lspci() -> None:
    controls, peers = parse_acs_controls(read_fixture(ACS_629))
    assert len(controls) == 15 and peers == []
    on = acs_redirecting(controls)
    assert len(on) == 4
    assert all(c.device is None and c.below is None for c in on)
    assert on[0].enabled == ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]


def gpu_port_acs_on(text: str) -> str:
    """The same tree with ACS turned on at the switch port above the first GPU (02:00.0)."""
    head, rest = text.split("02:00.0 PCI bridge", 1)
    port, tail = rest.split("03:00.0 ", 1)
    port = port.replace(
        "SrcValid- TransBlk- ReqRedir- CmpltRedir-", "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+"
    )
    return f"{head}02:00.0 PCI bridge{port}03:00.0 {tail}"


def test_acs_is_judged_by_what_sits_below_each_bridge() -> None:
    """A bridge's secondary to subordinate bus: GPUs and NICs below it or not."""
    text = read_fixture(ACS_NVSWITCH_PATH)
    controls, peers = parse_acs_controls(text)
    assert len(peers) == 4 and sum("ConnectX-7" in p for p in peers) == 2
    below = {c.device.split()[0]: c.below for c in controls if c.device}
    assert len(below["01:00.0"]) == 4 and below["07:00.0"] == []  # the NVSwitches' switch
    assert below["02:01.0"] == [peers[1]]
    on = [c for c in controls if c.enabled]
    assert [c.device.split()[0] for c in on] == ["08:00.0", "08:01.0"]
    assert acs_redirecting(controls) == []  # only NVSwitch bridges below them
    assert judge(h100_vm(acs=ACS_NVSWITCH_PATH)) == []
    [gpu_port] = acs_redirecting(parse_acs_controls(gpu_port_acs_on(text))[0])
    assert gpu_port.device.startswith("02:00.0") and gpu_port.below == [peers[0]]
    [finding] = judge(h100_vm(acs=gpu_port_acs_on(text)))
    assert finding.id == "pcie.acs_enabled" and finding.severity == "warn"
    assert "1 PCIe bridge on the path of this host's 4 GPUs and RDMA NICs" in finding.message
    assert finding.actual.startswith("02:00.0 PCI bridge: Broadcom")
    assert "(above 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1))" in (
        finding.actual
    )
    assert "08:00.0" not in finding.actual


def test_the_acs_read_keeps_each_bridges_bus_range(tmp_path: Path) -> None:
    """The fact's own filter of `lspci -vvv` (a stand-in lspci printing the tree) keeps what
    the parser judges by: the same value as the whole text parsed."""
    text = read_fixture(ACS_NVSWITCH_PATH)
    fact = PcieAcs()
    command = fact.command().replace("[ -e /proc/driver/nvidia/version ] && ", "")
    assert command != fact.command()
    read = fact.process(run_with_stand_in(tmp_path, "lspci", text, command))
    assert read == PcieAcs.parse({"acs": text})
    assert [c["below"] for c in read["controls"]][:2] == [read["peers"], read["peers"]]


def test_acs_on_a_multi_gpu_host_is_a_warning_naming_the_bridges() -> None:
    [finding] = judge(h100_vm(listing=FOUR_GPUS, acs=ACS_629))
    assert finding.id == "pcie.acs_enabled"
    assert (finding.severity, finding.remediation) == (
        rules()["checks"]["pcie.acs_enabled"]["severity"], "by-hand"
    )  # fmt: skip
    assert "4 PCIe bridges on the path of this host's 4 GPUs" in finding.message
    assert "SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+" in finding.actual


@pytest.mark.parametrize(
    ("listing", "acs"),
    [
        (None, ACS_629),  # the H100 80GB VM (driver 580.159.04): one GPU, no peer to talk to
        # The same host's lines with every control off.
        (FOUR_GPUS, "\n".join(x for x in read_fixture(ACS_629).splitlines() if "+" not in x)),
    ],
)
def test_no_acs_finding_without_a_peer_or_with_acs_off(listing: str | None, acs: str) -> None:
    raw = {"acs": acs} | ({"listing": listing} if listing else {})
    assert judge(h100_vm(**raw)) == []


def test_where_dmesg_is_refused_the_journal_s_kernel_log_is_read(tmp_path: Path) -> None:
    """dmesg restricted to root (kernel.dmesg_restrict) prints nothing and fails: the kernel
    log is then journalctl's, filtered the same way, and read once (nothing of a refused dmesg)."""
    refused = tmp_path / "dmesg"
    refused.write_text("#!/bin/sh\necho 'dmesg: read kernel buffer failed' >&2\nexit 1\n")
    refused.chmod(0o755)
    fact = KernelLog()
    lines = run_with_stand_in(tmp_path, "journalctl", read_fixture(SXID_20034), fact.command())
    assert (tmp_path / "args").read_text().split() == ["-k", "-b", "--no-pager", "-q"]
    assert len(fact.process(lines)["sxids"]) == 8
