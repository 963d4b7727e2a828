"""Checks over time: what one reading cannot tell, judged against what a node contract kept
from its earlier runs (gpurig.node.over_time keeps it; these functions do no I/O).

- An RDMA port's counters count since boot (or since someone cleared them), so a count is
  history; a fault is an increase. Symbol errors are judged as a rate, over the IBTA's bit error
  rate; any increase of the counters that mean a dropped link or a broken lossless contract is an
  error; a port whose state changed since the last run flapped. The first reading after boot,
  or after the counters were cleared, has no rate yet: it is said so, never guessed.
- An Xid or SXid that asked for a reboot, logged again on the boot after that reboot, is a fault
  the reboot did not clear: the hardware's case, not another reboot.

Thresholds and sources: gpurig/data/checks.yaml (`fabric_rates`, and each id's row).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

from gpurig.checks.fabric import ports_of
from gpurig.checks.gpu import _log as log_excerpt
from gpurig.checks.gpu import _xid_remedy as xid_remedy
from gpurig.checks.interconnect import sxid_class
from gpurig.checks.rules import found, rules
from gpurig.data.tables import table
from gpurig.named_tuple import NamedTuple
from gpurig.read.interconnect_parse import sxid_severity_word
from gpurig.spec.finding import Finding
from gpurig.spec.words import counted

FABRIC_IDS = ("fabric.symbol_error_rate", "fabric.link_errors", "fabric.port_flap")
IDS = (*FABRIC_IDS, "gpu.fault_after_reboot")
SYMBOLS = "symbol_error"
# Ports kept per record: a host with 16 dual-port HCAs has 32.
PORTS_MAX = 64


def _limits() -> Mapping[str, Any]:
    return rules()["fabric_rates"]


def _tracked() -> tuple[str, ...]:
    return (SYMBOLS, *_limits()["any_increase"])


def fabric_reading(fabric: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{"HCA/PORT": {"state", "counters": {name: count}}} of the counters judged over time
    (a counter without a PMA left out), from the fabric fact's value."""
    tracked = _tracked()
    return {
        name: {
            "state": port.get("state"),
            "counters": {
                c: v
                for c, v in (port.get("counters") or {}).items()
                if c in tracked and isinstance(v, int)
            },
        }
        for name, port in list(ports_of(fabric).items())[:PORTS_MAX]
    }


class Rates(NamedTuple):
    """What the fabric's rates judged: findings, notes (what has no rate yet, and why), and the
    record to keep for the next run."""

    findings: list[Finding]
    notes: list[str]
    kept: dict[str, Any]


def _fresh(reading: Mapping[str, Any], now: float, flaps: int) -> dict[str, Any]:
    counters = dict(reading["counters"])
    return {"state": reading["state"], "flaps": flaps, "first": counters,
            "base": {"at": now, "counters": counters}}  # fmt: skip


def fabric_rates(
    kept: Mapping[str, Any] | None, boot_id: str, now: float, fabric: Mapping[str, Any]
) -> Rates:
    """Judge the fabric reading `fabric` (the fact's value) at `now` (seconds since boot)
    against `kept` (this function's record of an earlier run, or None).

    Per port the record holds its last state and the flaps seen this boot, the counters at the
    first reading this boot (`first`: any increase of the any-increase counters since then
    stays an error for the boot, as an Xid does), and the start of the symbol-error window
    (`base`, renewed once a window has passed). A counter below what was kept was cleared:
    that port starts again, with no rate yet."""
    previous = kept.get("ports", {}) if kept and kept.get("boot_id") == boot_id else None
    findings: list[Finding] = []
    unrated: list[str] = []
    ports: dict[str, Any] = {}
    for name, reading in fabric_reading(fabric).items():
        had = (previous or {}).get(name)
        counters = reading["counters"]
        cleared = had is not None and any(
            c in counters and counters[c] < v
            for c, v in {**had["first"], **had["base"]["counters"]}.items()
        )
        if had is None or cleared:
            unrated.append(f"{name} ({'counters cleared' if cleared else 'first reading'})")
            ports[name] = _fresh(reading, now, had["flaps"] if had else 0)
            if had is not None:
                findings += _flap(name, had, reading, ports[name])
            continue
        port = {**_fresh(reading, now, had["flaps"]), "first": had["first"], "base": had["base"]}
        findings += _flap(name, had, reading, port)
        findings += _grew(name, had["first"], counters)
        findings += _symbols(name, had["base"], counters, now, port)
        ports[name] = port
    notes = []
    if previous is None and unrated:
        notes.append(f"fabric rates: no rate yet, the first reading since boot ({len(unrated)} "
                     "RDMA ports)")  # fmt: skip
    elif unrated:
        notes.append(f"fabric rates: no rate yet for {', '.join(unrated)}")
    return Rates(findings, notes, {"boot_id": boot_id, "ports": ports})


def _flap(
    name: str, had: Mapping[str, Any], reading: Mapping[str, Any], port: dict[str, Any]
) -> Iterator[Finding]:
    if reading["state"] == had["state"]:
        return
    port["flaps"] = had["flaps"] + 1
    yield found(
        "fabric.port_flap",
        f"RDMA port {name}",
        f"RDMA port {name} went from {had['state'] or 'no state'} to "
        f"{reading['state'] or 'no state'} since the last run (state changes seen since boot: "
        f"{port['flaps']})",
        f"state {had['state'] or 'unknown'} kept",
        f"state {reading['state'] or 'unknown'}; state changes seen since boot: {port['flaps']}",
        "a port that changes state between runs is losing its link: read link_downed and the "
        "switch's side, reseat or replace the cable or transceiver",
    )


def _grew(name: str, first: Mapping[str, int], counters: Mapping[str, int]) -> Iterator[Finding]:
    grew = {
        c: (first[c], counters[c])
        for c in _limits()["any_increase"]
        if c in first and c in counters and counters[c] > first[c]
    }
    if not grew:
        return
    yield found(
        "fabric.link_errors",
        f"RDMA port {name}",
        f"RDMA port {name}: "
        + ", ".join(f"{c} grew by {now - was}" for c, (was, now) in grew.items())
        + " since the first reading this boot",
        "no increase of " + ", ".join(grew),
        "; ".join(f"{c} {was} -> {now}" for c, (was, now) in grew.items()),
        "each increase dropped the link or a packet a lossless fabric must not drop: have the "
        "cable, transceiver or switch port replaced, then clear the counters (perfquery -R) or "
        "reboot",
    )


def _symbols(
    name: str, base: Mapping[str, Any], counters: Mapping[str, int], now: float,
    port: dict[str, Any],
) -> Iterator[Finding]:  # fmt: skip
    """Symbol errors over the window since `base`: an error once more than the hour's share
    have been counted (judged over at least a whole window, so a short one is never scaled
    up into a guess)."""
    limits = _limits()
    was, have = base["counters"].get(SYMBOLS), counters.get(SYMBOLS)
    seconds = now - base["at"]
    if was is None or have is None or seconds <= 0:
        return
    window = float(limits["window_seconds"])
    if seconds >= window:
        port["base"] = {"at": now, "counters": dict(counters)}
    allowed = limits["symbol_error_per_hour"] * max(seconds, window) / 3600
    grew = have - was
    if grew <= allowed:
        return
    per_hour = grew * 3600 / max(seconds, window)
    yield found(
        "fabric.symbol_error_rate",
        f"RDMA port {name}",
        f"RDMA port {name}: {grew} symbol errors in {_span(seconds)} ({per_hour:.0f} an hour "
        f"over the {window / 60:.0f}-minute window), over the "
        f"{limits['symbol_error_per_hour']} an hour of a 10^-12 bit error rate",
        f"at most {limits['symbol_error_per_hour']} symbol errors an hour",
        f"symbol_error {was} -> {have} in {seconds:.0f} s",
        "a link past the IBTA's bit error rate: reseat or replace the cable or transceiver "
        "and compare the switch port's counters",
    )


def _span(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def reboot_codes(log: Mapping[str, Any]) -> dict[str, list[str]]:
    """{code: its log lines} of the kernel log's Xid and SXid events whose remediation is a
    reboot (NVIDIA's catalog for an Xid, the Fabric Manager guide's category for an SXid);
    codes read "Xid 79", "SXid 12028"."""
    codes: dict[str, list[str]] = {}
    for event in log.get("xids") or []:
        if xid_remedy(event["xid"], event["message"])[0] == "reboot":
            codes.setdefault(f"Xid {event['xid']}", []).append(
                f"Xid ({event['pci']}): {event['xid']}, {event['message']}"
            )
    categories = table("interconnect.yaml")["sxid_categories"]
    words: dict[int, str] = {}  # one event logs several lines: the first word logged wins
    for event in log.get("sxids") or []:
        word = sxid_severity_word(event["message"])
        if word:
            words.setdefault(event["sxid"], word)
    for event in log.get("sxids") or []:
        _, category = sxid_class(event["sxid"], words.get(event["sxid"], ""))
        if categories[category]["remediation"] == "reboot":
            codes.setdefault(f"SXid {event['sxid']}", []).append(
                f"{event['switch']}: SXid ({event['pci']}): {event['sxid']}, {event['message']}"
            )
    return codes


def after_reboot(
    log: Mapping[str, Any], before: Collection[str]
) -> tuple[dict[str, Any], list[Finding]]:
    """The kernel log's events whose code asked for a reboot on the boot before this one
    (`before`) and is logged again: one `gpu.fault_after_reboot` per code, and the log without
    those events (so they are not also asked to reboot again; an Xid 79 takes the GPU's
    fallen-off-the-bus lines with it)."""
    again = {code: lines for code, lines in reboot_codes(log).items() if code in before}
    findings = [
        found(
            "gpu.fault_after_reboot",
            "kernel log",
            f"{code} asked for a reboot on the boot before this one and is logged again on "
            f"this one ({counted(len(lines), 'line')}): the reboot did not clear it",
            f"no {code} after the reboot it asked for",
            log_excerpt(lines),
            "send these log lines with the case",
        )
        for code, lines in sorted(again.items())
    ]
    if not again:
        return dict(log), findings
    left = dict(log)
    left["xids"] = [e for e in log.get("xids") or [] if f"Xid {e['xid']}" not in again]
    left["sxids"] = [e for e in log.get("sxids") or [] if f"SXid {e['sxid']}" not in again]
    if "Xid 79" in again:
        left["fallen_off_bus"] = []
    return left, findings
