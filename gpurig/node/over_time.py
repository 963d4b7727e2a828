"""What the node contracts keep between runs to judge over time (gpurig.checks.over_time
judges; this module reads and writes the records):

- the fabric's counters and port states with their time, in the runtime directory
  (gpurig.spec.runtime: /run/gpurig for root, cleared at boot as the counters are), keyed by
  boot id as well, for a GPURIG_RUNTIME_DIR that outlives a boot;
- the Xid and SXid codes that asked for a reboot, in root's state file beside the
  acknowledgements (gpurig.node.ack), by boot id.

Where a record cannot be kept (no runtime directory, not root's alone, another run holding its
lock) the run judges what it can and keeps nothing: it never fails for it."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from gpurig.checks import over_time
from gpurig.checks.judge import Probed
from gpurig.facts.gpurig_fabric import Fabric
from gpurig.facts.gpurig_nvidia import KernelLog
from gpurig.facts.round_trip import read_key
from gpurig.node import ack as acks
from gpurig.node import record
from gpurig.spec import runtime
from gpurig.spec.finding import Finding

FABRIC_FILE = "fabric-rates.json"
FABRIC_BYTES = 65536


def _counts(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        for k, v in value.items()
    )


def _port(value: Any) -> bool:
    base = value.get("base") if isinstance(value, dict) else None
    return (
        isinstance(value, dict) and set(value) == {"state", "flaps", "first", "base"}
        and (value["state"] is None or isinstance(value["state"], str))
        and isinstance(value["flaps"], int) and _counts(value["first"])
        and isinstance(base, dict) and set(base) == {"at", "counters"}
        and isinstance(base["at"], (int, float)) and _counts(base["counters"])
    )  # fmt: skip


def fabric_from_text(text: str) -> dict[str, Any]:
    """The fabric record (gpurig.checks.over_time.fabric_rates' `kept`); ValueError for any
    other shape."""
    data = json.loads(text)
    if not (
        isinstance(data, dict) and set(data) == {"boot_id", "ports"}
        and isinstance(data["boot_id"], str) and isinstance(data["ports"], dict)
        and len(data["ports"]) <= over_time.PORTS_MAX
        and all(isinstance(k, str) and _port(v) for k, v in data["ports"].items())
    ):  # fmt: skip
        raise ValueError("expected a boot id and per-port counters")
    return data


def fabric(
    probed: Probed, boot_id: str, now: float, directory: str | os.PathLike[str] | None
) -> tuple[list[Finding], list[str]]:
    """The fabric's rates for this read (findings, notes), the record kept for the next run."""
    value = (probed.state or {}).get(read_key(Fabric, {}))
    if not isinstance(value, dict) or not value.get("hcas") or directory is None:
        return [], []
    try:
        with record.locked(directory, FABRIC_FILE):
            text = record.read(directory, FABRIC_FILE, FABRIC_BYTES)
            try:
                kept = None if text is None else fabric_from_text(text)
            except ValueError:
                kept = None
            rates = over_time.fabric_rates(kept, boot_id, now, value)
            record.write(directory, FABRIC_FILE, json.dumps(rates.kept, sort_keys=True))
    except OSError as exc:
        return [], [f"fabric rates: not judged, nothing kept ({exc})"]
    return rates.findings, rates.notes


def reboots(
    probed: Probed,
    full_log: Mapping[str, Any] | None,
    boot_id: str,
    directory: str | os.PathLike[str] | None,
) -> tuple[Probed, list[Finding]]:
    """Record this boot's reboot-asking codes (from the whole kernel log, `full_log`) and judge
    the read's log against the boot before's: the read without the events that came back, and
    a finding for each."""
    key = read_key(KernelLog, {})
    log = (probed.state or {}).get(key)
    if not isinstance(log, dict) or not isinstance(full_log, dict):
        return probed, []
    asked = over_time.reboot_codes(full_log)
    where = directory or acks.STATE_DIR

    def recorded() -> tuple[acks.Ack | None, acks.Ack]:
        had = acks.load(where)
        return had, acks.asked_for_reboot(acks.on_boot(had, boot_id), asked)

    had, updated = recorded()
    if updated != had and (updated.asked or updated.before):  # nothing to keep: no write
        try:
            with record.locked(where, acks.STATE_FILE):
                had, updated = recorded()  # again, under the lock: `gpurig ack` may have written
                acks.save(updated, where)
        except OSError:
            pass  # not root's alone, or held: judged by what was read, kept next time
    before = updated.before
    left, findings = over_time.after_reboot(log, before)
    if not findings:
        return probed, []
    return probed._replace(state={**(probed.state or {}), key: left}), findings


def acknowledged(probed: Probed, limits: Mapping[str, float]) -> Probed:
    """The read without the kernel-log events `gpurig ack` said are handled (gpurig.node.ack)."""
    key = read_key(KernelLog, {})
    log = (probed.state or {}).get(key)
    if not limits or not isinstance(log, dict):
        return probed
    return probed._replace(state={**(probed.state or {}), key: acks.unacknowledged(log, limits)})


def judged(
    full: Probed,
    limits: Mapping[str, float],
    boot: Callable[[], str] = acks.boot_id,
    clock: Callable[[], float] = lambda: time.clock_gettime(time.CLOCK_BOOTTIME),
    state_dir: str | os.PathLike[str] | None = None,
) -> tuple[Probed, list[Finding], list[str]]:
    """The read `full` without the kernel-log events acknowledged up to `limits`, judged over
    time: the read to judge as usual, the findings over time, and notes for stderr and syslog.
    `boot` and `clock` are the boot id and the seconds since boot (parameters at the edge, so a
    test can stand for a reboot)."""
    probed = acknowledged(full, limits)
    if probed.state is None:
        return probed, [], []
    try:
        boot_id = boot()
    except OSError:
        return probed, [], ["over time: the boot id cannot be read: nothing judged or kept"]
    found, notes = fabric(probed, boot_id, clock(), runtime.directory())
    full_log = (full.state or {}).get(read_key(KernelLog, {}))
    probed, back = reboots(probed, full_log, boot_id, state_dir)
    return probed, found + back, notes
