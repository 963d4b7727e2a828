"""`gpurig ack`: a person says that the kernel-log events seen so far on this node are handled.

The kernel log keeps every Xid, SXid, hung task and fallen-off-the-bus message since boot, so a
node fixed without a reboot (a GPU reset, `nvidia-smi -r`) would be reported, and drained,
until the next boot. An acknowledgement records, per id, the seconds since boot of the latest
such event then in the log (dmesg's own stamps: no second clock to disagree with), and the
boot it belongs to; the node contracts leave out every event of that id up to that point, on
that boot. An event whose line carries no seconds since boot (read through journalctl, where
dmesg is refused) is never left out: gpurig does not guess when it happened.

The record is one small file only root writes, `/var/lib/gpurig/ack.json` (one entry per id,
at most STATE_BYTES read back); its acknowledgements hold on their boot alone. The same file
keeps the Xid and SXid codes that asked for a reboot on this boot and on the boot before
(gpurig.checks.over_time): the same code after that reboot is a hardware fault, not a reason to
reboot again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from gpurig.named_tuple import NamedTuple
from gpurig.node import record
from gpurig.read.gpu_parse import parse_fallen_off_bus, parse_xid_lines
from gpurig.read.interconnect_parse import parse_hung_tasks, parse_sxid_lines
from gpurig.spec.tuples import asdict

STATE_DIR = "/var/lib/gpurig"
STATE_FILE = "ack.json"
STATE_BYTES = 4096
BOOT_ID = "/proc/sys/kernel/random/boot_id"
# The ids judged from the kernel log (gpurig/checks/gpu.py, interconnect.py); an Xid 79 is a
# GPU fallen off the bus.
KERNEL_LOG_IDS = ("gpu.fallen_off_bus", "gpu.hung_task", "gpu.sxid", "gpu.xid")
FALLEN_XID = 79
# At most this many reboot-asking codes kept per boot (the record stays within STATE_BYTES).
CODES_MAX = 32


class Ack(NamedTuple):
    """Per id: the seconds since boot up to which its events are handled, and when (Unix
    time) a person said so; all on boot `boot_id`. `asked`: the codes that asked for a reboot
    on that boot; `before`: those of the boot before it."""

    boot_id: str
    upto: Mapping[str, float]
    when: Mapping[str, float]
    asked: tuple[str, ...] = ()
    before: tuple[str, ...] = ()

    def on(self, boot_id: str) -> Mapping[str, float]:
        """The per-id limits that hold on boot `boot_id` (none on another boot)."""
        return self.upto if boot_id == self.boot_id else {}


def on_boot(ack: Ack | None, boot_id: str) -> Ack:
    """The record as it stands on boot `boot_id`: a record of another boot keeps no
    acknowledgement, and what asked for a reboot there becomes the boot before's."""
    if ack is None:
        return Ack(boot_id, {}, {})
    if ack.boot_id == boot_id:
        return ack
    return Ack(boot_id, {}, {}, (), ack.asked)


def asked_for_reboot(ack: Ack, codes: Collection[str]) -> Ack:
    """The record with `codes` (asking for a reboot on its boot now) added to `asked`."""
    asked = tuple(sorted(set(ack.asked) | set(codes))[:CODES_MAX])
    return Ack(ack.boot_id, ack.upto, ack.when, asked, ack.before)


def _kernel_log_id(kind: str, event: Mapping[str, Any]) -> str:
    if kind == "xids":
        return "gpu.fallen_off_bus" if event["xid"] == FALLEN_XID else "gpu.xid"
    return {"fallen_off_bus": "gpu.fallen_off_bus", "sxids": "gpu.sxid",
            "hung_tasks": "gpu.hung_task"}[kind]  # fmt: skip


def latest(log: Mapping[str, Any]) -> dict[str, float]:
    """Per kernel-log id, the seconds since boot of its latest stamped event in `log` (the
    KernelLog read's value: xids, fallen_off_bus, sxids, hung_tasks)."""
    found: dict[str, float] = {}
    for kind in ("xids", "fallen_off_bus", "sxids", "hung_tasks"):
        for event in log.get(kind) or []:
            at = event.get("at")
            if at is not None:
                fid = _kernel_log_id(kind, event)
                found[fid] = max(found.get(fid, at), at)
    return found


def parse_log(text: str) -> dict[str, Any]:
    """Kernel log text read as the KernelLog read reads it (the same parsers)."""
    return {
        "xids": [asdict(e) for e in parse_xid_lines(text)],
        "fallen_off_bus": [asdict(e) for e in parse_fallen_off_bus(text)],
        "sxids": [asdict(e) for e in parse_sxid_lines(text)],
        "hung_tasks": [{"at": t.at} for t in parse_hung_tasks(text)],
    }


def acknowledge(
    previous: Ack | None, boot_id: str, seen: Mapping[str, float], ids: Iterable[str], now: float
) -> Ack:
    """The record after acknowledging `ids` up to what the log holds now (`seen`, latest());
    an id with no stamped event keeps what it had. Acknowledgements of another boot are
    dropped."""
    kept = on_boot(previous, boot_id)
    upto, when = dict(kept.upto), dict(kept.when)
    for fid in ids:
        if fid in seen:
            upto[fid], when[fid] = seen[fid], now
    return Ack(boot_id, upto, when, kept.asked, kept.before)


def unacknowledged(log: Mapping[str, Any], limits: Mapping[str, float]) -> dict[str, Any]:
    """The KernelLog read's value without the events an acknowledgement covers (an event at or
    before its id's limit); events without seconds since boot stay."""

    def stays(kind: str, event: Mapping[str, Any]) -> bool:
        limit, at = limits.get(_kernel_log_id(kind, event)), event.get("at")
        return limit is None or at is None or at > limit

    kinds = ("xids", "fallen_off_bus", "sxids", "hung_tasks")
    return {**log, **{k: [e for e in log.get(k) or [] if stays(k, e)] for k in kinds if k in log}}


def as_text(ack: Ack) -> str:
    data: dict[str, object] = {"boot_id": ack.boot_id, "upto": dict(ack.upto),
                               "when": dict(ack.when)}  # fmt: skip
    if ack.asked or ack.before:
        data["reboots"] = {"asked": list(ack.asked), "before": list(ack.before)}
    return json.dumps(data, sort_keys=True) + "\n"


def _codes(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > CODES_MAX or not all(
        isinstance(c, str) and 0 < len(c) <= 16 for c in value
    ):  # fmt: skip
        raise ValueError("expected at most 32 short codes")
    return tuple(value)


def from_text(text: str) -> Ack:
    """The record; ValueError for any other shape."""
    data = json.loads(text)
    if not isinstance(data, dict) or not {"boot_id", "upto", "when"} <= set(data) <= {
        "boot_id", "upto", "when", "reboots"
    }:  # fmt: skip
        raise ValueError("expected boot_id, upto and when (and reboots)")
    maps = [data["upto"], data["when"]]
    if not isinstance(data["boot_id"], str) or not all(
        isinstance(m, dict) and set(m) <= set(KERNEL_LOG_IDS)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in m.values())
        for m in maps
    ):  # fmt: skip
        raise ValueError("expected a boot id and seconds per kernel-log id")
    reboots = data.get("reboots", {"asked": [], "before": []})
    if not isinstance(reboots, dict) or set(reboots) != {"asked", "before"}:
        raise ValueError("expected reboots: asked and before")
    return Ack(data["boot_id"], data["upto"], data["when"], _codes(reboots["asked"]),
               _codes(reboots["before"]))  # fmt: skip


def boot_id() -> str:
    with open(BOOT_ID) as f:
        return f.read().strip()


def current() -> tuple[Mapping[str, float], Mapping[str, float]]:
    """(per-id limits, per-id time of the acknowledgement) that hold on this boot; none where
    there is no record one can trust or the boot cannot be told."""
    ack = load()
    try:
        limits = ack.on(boot_id()) if ack is not None else {}
    except OSError:
        return {}, {}
    return limits, {fid: ack.when[fid] for fid in limits if ack is not None and fid in ack.when}


def load(directory: str | os.PathLike[str] | None = None) -> Ack | None:
    """The record, where there is one that root (or this account) alone could have written and
    that reads as a record; None otherwise (no acknowledgement: every event is reported)."""
    text = record.read(directory or STATE_DIR, STATE_FILE, STATE_BYTES)
    try:
        return None if text is None else from_text(text)
    except ValueError:
        return None


def save(ack: Ack, directory: str | os.PathLike[str] | None = None) -> str:
    """Write the record, root-only (directory 0700, file 0600), replaced atomically; OSError
    where the directory is not root's alone."""
    return record.write(directory or STATE_DIR, STATE_FILE, as_text(ack))


def kernel_log() -> str:
    """`dmesg` as root reads it, found in the system's directories only (facts.round_trip's
    ROOT_PATH); OSError when it cannot be read."""
    import subprocess

    from gpurig.facts.round_trip import ROOT_PATH, root_tool

    tool = root_tool("dmesg")
    if tool is None:
        raise OSError(f"no dmesg in {ROOT_PATH}")
    try:
        done = subprocess.run([tool], capture_output=True, text=True, errors="replace",
                              stdin=subprocess.DEVNULL, timeout=10, cwd="/")  # fmt: skip
    except subprocess.TimeoutExpired:
        raise OSError("dmesg: no answer within 10 s") from None
    if done.returncode != 0:
        raise OSError(f"dmesg: {done.stderr.strip()[:300]}")
    return done.stdout


def run(
    ids: Iterable[str], now: float, directory: str | os.PathLike[str] | None = None
) -> list[str]:
    """Acknowledge `ids` up to the kernel log's latest events now; what was done, per id."""
    seen = latest(parse_log(kernel_log()))
    wanted = list(ids)
    with record.locked(directory or STATE_DIR, STATE_FILE):
        ack = acknowledge(load(directory), boot_id(), seen, wanted, now)
        path = save(ack, directory)
    return [
        f"gpurig ack: {fid}: events up to {seen[fid]:.6f} s since boot are handled ({path})"
        if fid in seen
        else f"gpurig ack: {fid}: no event in the kernel log to acknowledge"
        for fid in wanted
    ]
