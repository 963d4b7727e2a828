"""`gpurig drift --local --mode MODE`: run a node contract (gpurig/node/modes.py) and say its
result the way its engine reads it: stdout, stderr, syslog, the textfile and the exit status.

Syslog (facility daemon, tag `gpurig`) is where an operator finds why a prolog refused a job
or a health check drained a node: slurmd keeps neither program's output.
"""

from __future__ import annotations

import os
import sys
import syslog
import time
from collections.abc import Mapping
from typing import Literal, TextIO

from gpurig.checks.judge import Probed, Scope
from gpurig.checks.judge import report as judge
from gpurig.checks.node_actions import Policy, policy
from gpurig.facts.gpurig_nvidia import KernelLog
from gpurig.facts.round_trip import read_key
from gpurig.node import ack as acks
from gpurig.node import modes as node_modes
from gpurig.node import over_time
from gpurig.node.policy import governed, withheld
from gpurig.node.read import read_local
from gpurig.read.local import StartedRead
from gpurig.report.render import render
from gpurig.spec.finding import Finding, HostReport
from gpurig.spec.inventory import Host


def _log(lines: list[str], priority: int) -> None:
    syslog.openlog("gpurig", 0, syslog.LOG_DAEMON)
    for line in lines:
        syslog.syslog(priority, line)
    syslog.closelog()


def _say(lines: list[str], priority: int, stdout: bool = False) -> None:
    """The lines on stderr (stdout: the first one there instead) and in syslog."""
    for index, line in enumerate(lines):
        print(line, file=sys.stdout if stdout and index == 0 else sys.stderr)
    _log(lines, priority)


def refused(name: str, message: str) -> int:
    """The spec could not be loaded (already said on stderr): could not check."""
    m = node_modes.mode(name)
    why = "invalid spec (see stderr or syslog)"
    if name == "npd":
        print(f"gpurig: could not check: {why}"[: m.max_output or 80])
    _log([f"gpurig {name}: could not check: {message.splitlines()[0][:300]}"], syslog.LOG_ERR)
    return node_modes.exit_status(m, "unknown")


def scope(m: node_modes.Mode) -> Scope:
    return Scope(m.plans, m.containers, m.imports, bound=m.read_seconds)


def run_mode(
    name: str,
    host: Host,
    started: float,
    fmt: str,
    output: TextIO | None,
    textfile: str | os.PathLike[str] | None,
    ahead: StartedRead | None = None,
) -> int:
    """Read and judge this node as the mode says, act as the spec's policy says, and return
    the exit status."""
    m = node_modes.mode(name)
    pol = policy(host.spec)
    limits, acknowledged_at = acks.current()
    probed = read_local(host, scope(m), timeout=m.read_seconds, ahead=ahead)
    now_read, later, notes = over_time.judged(acknowledged(probed, limits), probed)
    report = governed(with_findings(judge(now_read, scope(m)), later), pol, node_modes.UNCHECKED)
    if output is not None:
        output.write(render([report], fmt))
    result = node_modes.verdict(report)
    drain = node_modes.acted_on(report, pol, "drain")
    status, outcome = node_modes.exit_status(m, result), None
    if name == "npd":
        print(node_modes.npd_line(report, m))
    elif name == "prolog":
        # slurmd says which of the two runs it (and keeps an Epilog's output in its log).
        context = "epilog" if os.environ.get("SLURM_SCRIPT_CONTEXT") == "epilog_slurmd" else name
        lines = node_modes.detail_lines(report, f"gpurig {context}")
        lines += [f"gpurig {context}: {note}" for note in notes]
        if drain:
            done, outcome = _act(report, drain, pol, resume=False)
            what = "refused the job" if context == "prolog" else "problem after the job"
            if outcome == "withheld":  # a spec error, likely: the job runs
                what, status = "the job runs", 0
            lines.insert(0, f"gpurig {context}: {what}: {done}")
        elif result == "problem":  # errors the policy only reports: never a drain
            status = 0
            lines.insert(0, f"gpurig {context}: the job runs: {_reported(report, pol)}")
        _say(lines, syslog.LOG_INFO if result == "ok" else syslog.LOG_ERR)
    else:
        lines = node_modes.detail_lines(report, "gpurig healthcheck")
        lines += [f"gpurig healthcheck: {note}" for note in notes]
        done, outcome = _act(report, drain, pol, resume=True)
        if result == "problem" and not drain:
            done += f"; {_reported(report, pol)}"
        if outcome == "withheld":
            lines.insert(0, f"gpurig healthcheck: {done}")
        _say([f"gpurig healthcheck: {result}: {done}", *lines],
             syslog.LOG_INFO if result == "ok" else syslog.LOG_ERR, stdout=True)  # fmt: skip
        if outcome in ("cannot", "withheld"):
            status = node_modes.exit_status(m, "unknown")
    if textfile is not None:
        from gpurig.report.textfile import contract_families, written

        ids = [i for i in node_modes.checked_ids(m) if pol.action(i) != "off"]
        withheld = None if name == "npd" else outcome == "withheld"
        extra = contract_families(withheld, acknowledged_at)
        written(textfile, [report], time.monotonic() - started, False, ids, extra)
    return status


def with_findings(report: HostReport, later: list[Finding]) -> HostReport:
    """The report with the findings judged over time (gpurig.node.over_time) added."""
    if not later or not report.reachable:
        return report
    return report._replace(findings=[*report.findings, *later])


def acknowledged(probed: Probed, limits: Mapping[str, float]) -> Probed:
    """The read without the kernel-log events `gpurig ack` said are handled (gpurig.node.ack)."""
    key = read_key(KernelLog, {})
    log = (probed.state or {}).get(key)
    if not limits or not isinstance(log, dict):
        return probed
    return probed._replace(state={**(probed.state or {}), key: acks.unacknowledged(log, limits)})


def _reported(report: HostReport, pol: Policy) -> str:
    return (
        f"not drained for {' '.join(node_modes.acted_on(report, pol, 'report'))} (policy: report)"
    )


def _act(
    report: HostReport, drain: list[str], pol: Policy, resume: bool
) -> tuple[str, Literal["acted", "cannot", "withheld"]]:
    """Drain this node for the `drain` ids (or, with `resume`, resume it) through scontrol as
    node_modes.health_action says, within the policy's drain budget; what was done, in words,
    and whether it acted, could not, or withheld a drain past the budget.

    The prolog drains too, before it exits 1: slurmctld then keeps gpurig's reason (it gives
    its own, "Prolog error", only to a node not drained yet), so the health check can resume
    the node once it is clean."""
    from gpurig.node import slurm

    try:
        name = slurm.node_name()
        node, nodes = slurm.show_all(name)
        action = node_modes.health_action(node, report, drain)
        if action is not None and action[0] == "resume" and not resume:
            action = None
        if action is not None and action[0] == "drain" and node.held.ids is None:
            why = withheld([n.held for n in nodes], name, drain, pol)
            if why is not None:
                return why, "withheld"
        slurm.apply(name, action)
    except slurm.SlurmError as exc:
        return f"cannot act: {exc}", "cannot"
    if action is None:
        return f"{name} left as it is", "acted"
    return (f"drained {name}: {action[1]}" if action[0] == "drain" else f"resumed {name}"), "acted"
