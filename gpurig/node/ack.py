"""`gpurig ack`: a person says that the kernel-log events seen so far on this node are handled.

The kernel log keeps every Xid, SXid, hung task and fallen-off-the-bus message since boot, so a
node fixed without a reboot (a GPU reset, `nvidia-smi -r`) would be reported, and drained,
until the next boot. An acknowledgement records, per id, the seconds since boot of the latest
such event then in the log (dmesg's own stamps: no second clock to disagree with), and the
boot it belongs to; the node contracts leave out every event of that id up to that point, on
that boot. An event whose line carries no seconds since boot (read through journalctl, where
dmesg is refused) is never left out: gpurig does not guess when it happened.

The record is one small file only root writes, `/var/lib/gpurig/ack.json` (one entry per id,
at most STATE_BYTES read back); a record of another boot is void.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from gpurig.read.gpu_parse import parse_fallen_off_bus, parse_xid_lines
from gpurig.read.interconnect_parse import parse_hung_tasks, parse_sxid_lines
from gpurig.spec.record import asdict

STATE_DIR = Path("/var/lib/gpurig")
STATE_FILE = "ack.json"
STATE_BYTES = 4096
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
# The ids judged from the kernel log (gpurig/checks/gpu.py, interconnect.py); an Xid 79 is a
# GPU fallen off the bus.
KERNEL_LOG_IDS = ("gpu.fallen_off_bus", "gpu.hung_task", "gpu.sxid", "gpu.xid")
FALLEN_XID = 79


class Ack(NamedTuple):
    """Per id: the seconds since boot up to which its events are handled, and when (Unix
    time) a person said so; all on boot `boot_id`."""

    boot_id: str
    upto: Mapping[str, float]
    when: Mapping[str, float]

    def on(self, boot_id: str) -> Mapping[str, float]:
        """The per-id limits that hold on boot `boot_id` (none on another boot)."""
        return self.upto if boot_id == self.boot_id else {}


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
    an id with no stamped event keeps what it had. A record of another boot is dropped."""
    kept = previous if previous is not None and previous.boot_id == boot_id else None
    upto = dict(kept.upto) if kept else {}
    when = dict(kept.when) if kept else {}
    for fid in ids:
        if fid in seen:
            upto[fid], when[fid] = seen[fid], now
    return Ack(boot_id, upto, when)


def unacknowledged(log: Mapping[str, Any], limits: Mapping[str, float]) -> dict[str, Any]:
    """The KernelLog read's value without the events an acknowledgement covers (an event at or
    before its id's limit); events without seconds since boot stay."""

    def stays(kind: str, event: Mapping[str, Any]) -> bool:
        limit, at = limits.get(_kernel_log_id(kind, event)), event.get("at")
        return limit is None or at is None or at > limit

    kinds = ("xids", "fallen_off_bus", "sxids", "hung_tasks")
    return {**log, **{k: [e for e in log.get(k) or [] if stays(k, e)] for k in kinds if k in log}}


def as_text(ack: Ack) -> str:
    return json.dumps({"boot_id": ack.boot_id, "upto": dict(ack.upto), "when": dict(ack.when)},
                      sort_keys=True) + "\n"  # fmt: skip


def from_text(text: str) -> Ack:
    """The record; ValueError for any other shape."""
    data = json.loads(text)
    if not isinstance(data, dict) or set(data) != {"boot_id", "upto", "when"}:
        raise ValueError("expected boot_id, upto and when")
    maps = [data["upto"], data["when"]]
    if not isinstance(data["boot_id"], str) or not all(
        isinstance(m, dict) and set(m) <= set(KERNEL_LOG_IDS)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in m.values())
        for m in maps
    ):  # fmt: skip
        raise ValueError("expected a boot id and seconds per kernel-log id")
    return Ack(data["boot_id"], data["upto"], data["when"])


def boot_id() -> str:
    return BOOT_ID.read_text().strip()


def current() -> tuple[Mapping[str, float], Mapping[str, float]]:
    """(per-id limits, per-id time of the acknowledgement) that hold on this boot; none where
    there is no record one can trust or the boot cannot be told."""
    ack = load()
    try:
        limits = ack.on(boot_id()) if ack is not None else {}
    except OSError:
        return {}, {}
    return limits, {fid: ack.when[fid] for fid in limits if ack is not None and fid in ack.when}


def _trusted(info: os.stat_result, kind: int) -> bool:
    """Root's (or the running account's) alone: no other account wrote it."""
    owner = info.st_uid in (0, os.geteuid())
    return stat.S_IFMT(info.st_mode) == kind and owner and not info.st_mode & 0o022


def load(directory: Path | None = None) -> Ack | None:
    """The record, where there is one that root (or this account) alone could have written and
    that reads as a record; None otherwise (no acknowledgement: every event is reported)."""
    directory = directory or STATE_DIR
    try:
        if not _trusted(os.lstat(directory), stat.S_IFDIR):
            return None
        fd = os.open(directory / STATE_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not _trusted(os.fstat(fd), stat.S_IFREG):
            return None
        return from_text(os.read(fd, STATE_BYTES + 1)[:STATE_BYTES].decode())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def save(ack: Ack, directory: Path | None = None) -> Path:
    """Write the record, root-only (directory 0700, file 0600), replaced atomically; OSError
    where the directory is not root's alone."""
    from gpurig.fsutil import atomic_write

    directory = directory or STATE_DIR
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _trusted(os.lstat(directory), stat.S_IFDIR):
        raise PermissionError(f"{directory}: not a directory only root may write")
    path = directory / STATE_FILE
    atomic_write(path, as_text(ack), 0o600)
    return path


def kernel_log() -> str:
    """`dmesg` as root reads it, found in the system's directories only (facts.round_trip's
    ROOT_PATH); OSError when it cannot be read."""
    import shutil
    import subprocess

    from gpurig.facts.round_trip import ROOT_PATH

    tool = shutil.which("dmesg", path=ROOT_PATH)
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


def run(ids: Iterable[str], now: float, directory: Path | None = None) -> list[str]:
    """Acknowledge `ids` up to the kernel log's latest events now; what was done, per id."""
    seen = latest(parse_log(kernel_log()))
    wanted = list(ids)
    ack = acknowledge(load(directory), boot_id(), seen, wanted, now)
    path = save(ack, directory)
    return [
        f"gpurig ack: {fid}: events up to {seen[fid]:.6f} s since boot are handled ({path})"
        if fid in seen
        else f"gpurig ack: {fid}: no event in the kernel log to acknowledge"
        for fid in wanted
    ]
