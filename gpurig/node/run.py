"""`gpurig drift --local --mode MODE`: run a node contract (gpurig/node/modes.py) and say its
result the way its engine reads it: stdout, stderr, syslog, the textfile and the exit status.

A contract runs five stages, each once, in this order, each in one place (`run_mode`):

- `read`: this node's one read (gpurig.node.read), taking over the read started ahead where it
  is the same command (gpurig.node.ahead);
- `judge`: the read judged by drift's plans and checks (gpurig.checks.judge), over time
  (gpurig.node.over_time) and without the kernel-log events `gpurig ack` said are handled
  (gpurig.node.ack): one `Judged`;
- `govern`: the spec's policy (gpurig.checks.node_actions) over the judged report, and for a
  mode that drains, SLURM's view of the cluster and the drain budget (gpurig.node.policy): one
  `Decision`, what drains or resumes and what is withheld, and why;
- `act`: the node drained or resumed (gpurig.node.slurm), the lines on stderr and in syslog,
  the report where --output says, the textfile (gpurig.report.textfile);
- `say`: NPD's line, and the exit status.

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

from gpurig.checks.judge import Probed
from gpurig.checks.judge import report as judged_report
from gpurig.checks.node_actions import Policy, policy
from gpurig.named_tuple import NamedTuple
from gpurig.node import ack as acks
from gpurig.node import modes as node_modes
from gpurig.node import over_time
from gpurig.node.modes import Action, Mode, Verdict
from gpurig.node.policy import governed, withheld
from gpurig.node.read import read_local
from gpurig.read.local import StartedRead
from gpurig.report.render import render
from gpurig.spec.finding import HostReport
from gpurig.spec.inventory import Host

# What acting on SLURM came to: done, could not be done, or a drain withheld by the budget.
Outcome = Literal["acted", "cannot", "withheld"]


class Judged(NamedTuple):
    """The judge's one value: the node's report (drift's findings, those over time, without
    the acknowledged kernel-log events), the notes over time, and when each acknowledged id
    was acknowledged."""

    report: HostReport
    notes: list[str]
    acknowledged_at: Mapping[str, float]


class Decision(NamedTuple):
    """What the policy and the budget make of a judged node: the report as the policy shows it
    (no `off` finding), its verdict and the ids whose errors drain; where the mode acts on
    SLURM (`asked`), the node's name, the action to apply, and why a drain is withheld or SLURM
    could not be asked."""

    mode: Mode
    policy: Policy
    report: HostReport
    verdict: Verdict
    drain: list[str]
    asked: bool = False
    node: str = ""
    action: Action = None
    withheld: str | None = None
    cannot: str | None = None


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


def run_mode(
    m: Mode,
    host: Host,
    started: float,
    fmt: str,
    output: TextIO | None,
    textfile: str | os.PathLike[str] | None,
    ahead: StartedRead | None = None,
) -> int:
    """Read and judge this node as the mode says, govern and act as the spec's policy says,
    and return the exit status."""
    probed = read(host, m, ahead)
    judged = judge(probed, m)
    decision = govern(judged, m, policy(host.spec))
    outcome = act(decision, judged, started, fmt, output, textfile)
    return say(decision, outcome)


def read(host: Host, m: Mode, ahead: StartedRead | None = None) -> Probed:
    """This node read as the mode says, within its read time."""
    return read_local(host, m.scope, timeout=m.read_seconds, ahead=ahead)


def judge(probed: Probed, m: Mode) -> Judged:
    """The read judged: acknowledged kernel-log events left out, over time, then drift's plans
    and checks as the mode scopes them."""
    limits, acknowledged_at = acks.current()
    now_read, later, notes = over_time.judged(probed, limits)
    report = judged_report(now_read, m.scope)
    if later and report.reachable:  # the findings judged over time added
        report = report._replace(findings=[*report.findings, *later])
    return Judged(report, notes, acknowledged_at)


def govern(judged: Judged, m: Mode, pol: Policy) -> Decision:
    """What the policy makes of the judged node; for the health check, and the prolog with an
    error that drains, what to do to the node in SLURM within the drain budget."""
    report = governed(judged.report, pol, node_modes.UNCHECKED)
    drain = node_modes.acted_on(report, pol, "drain")
    decision = Decision(m, pol, report, node_modes.verdict(report), drain)
    if m.name == "healthcheck" or (m.name == "prolog" and drain):
        return _budgeted(decision, resume=m.name == "healthcheck")
    return decision


def _budgeted(decision: Decision, resume: bool) -> Decision:
    """The decision with SLURM asked: drain this node for the decision's `drain` ids (or, with
    `resume`, resume it) as node_modes.health_action says, within the policy's drain budget.

    The prolog drains too, before it exits 1: slurmctld then keeps gpurig's reason (it gives
    its own, "Prolog error", only to a node not drained yet), so the health check can resume
    the node once it is clean."""
    from gpurig.node import slurm

    decision = decision._replace(asked=True)
    try:
        name = slurm.node_name()
        node, nodes = slurm.show_all(name)
    except slurm.SlurmError as exc:
        return decision._replace(cannot=f"cannot act: {exc}")
    drain, pol = decision.drain, decision.policy
    action = node_modes.health_action(node, decision.report, drain)
    if action is not None and action[0] == "resume" and not resume:
        action = None
    if action is not None and action[0] == "drain" and node.held.ids is None:
        why = withheld([n.held for n in nodes], name, drain, pol)
        if why is not None:
            return decision._replace(node=name, withheld=why)
    return decision._replace(node=name, action=action)


def act(
    decision: Decision,
    judged: Judged,
    started: float,
    fmt: str,
    output: TextIO | None,
    textfile: str | os.PathLike[str] | None,
) -> tuple[str, Outcome] | None:
    """What the decision says done: the report where --output says, the node drained or
    resumed, the lines on stderr and in syslog, the textfile. What acting on SLURM did, in
    words, and its outcome; None where the mode did not ask SLURM."""
    m, report, pol = decision.mode, decision.report, decision.policy
    if output is not None:
        output.write(render([report], fmt))
    done = _applied(decision) if decision.asked else None
    if m.name == "prolog":
        _say_prolog(decision, judged.notes, done)
    elif m.name == "healthcheck" and done is not None:
        _say_healthcheck(decision, judged.notes, done)
    if textfile is not None:
        from gpurig.report.textfile import contract_families, written

        ids = [i for i in node_modes.checked_ids(m) if pol.action(i) != "off"]
        was_withheld = None if m.name == "npd" else done is not None and done[1] == "withheld"
        extra = contract_families(was_withheld, judged.acknowledged_at)
        written(textfile, [report], time.monotonic() - started, False, ids, extra)
    return done


def say(decision: Decision, done: tuple[str, Outcome] | None) -> int:
    """NPD's line on stdout; the exit status the mode gives the verdict and what was done."""
    m, result = decision.mode, decision.verdict
    outcome = None if done is None else done[1]
    status = node_modes.exit_status(m, result)
    if m.name == "npd":
        print(node_modes.npd_line(decision.report, m))
    elif m.name == "prolog" and outcome in (None, "withheld"):
        status = 0  # nothing drains, or a drain is withheld (a spec error, likely): the job runs
    elif m.name == "healthcheck" and outcome in ("cannot", "withheld"):
        status = node_modes.exit_status(m, "unknown")
    return status


def _applied(decision: Decision) -> tuple[str, Outcome]:
    """The decision's action applied through scontrol: what was done, in words, and whether it
    acted, could not, or withheld a drain past the budget."""
    from gpurig.node import slurm

    if decision.cannot is not None:
        return decision.cannot, "cannot"
    if decision.withheld is not None:
        return decision.withheld, "withheld"
    name, action = decision.node, decision.action
    try:
        slurm.apply(name, action)
    except slurm.SlurmError as exc:
        return f"cannot act: {exc}", "cannot"
    if action is None:
        return f"{name} left as it is", "acted"
    return (f"drained {name}: {action[1]}" if action[0] == "drain" else f"resumed {name}"), "acted"


def _say_prolog(decision: Decision, notes: list[str], done: tuple[str, Outcome] | None) -> None:
    """The prolog's (or epilog's) lines: what it did about the job first, then each error."""
    # slurmd says which of the two runs it (and keeps an Epilog's output in its log).
    epilog = os.environ.get("SLURM_SCRIPT_CONTEXT") == "epilog_slurmd"
    context = "epilog" if epilog else "prolog"
    report, result = decision.report, decision.verdict
    lines = node_modes.detail_lines(report, f"gpurig {context}")
    lines += [f"gpurig {context}: {note}" for note in notes]
    if done is not None:
        what = "refused the job" if context == "prolog" else "problem after the job"
        if done[1] == "withheld":  # a spec error, likely: the job runs
            what = "the job runs"
        lines.insert(0, f"gpurig {context}: {what}: {done[0]}")
    elif result == "problem":  # errors the policy only reports: never a drain
        lines.insert(0, f"gpurig {context}: the job runs: {_reported(decision)}")
    _say(lines, syslog.LOG_INFO if result == "ok" else syslog.LOG_ERR)


def _say_healthcheck(decision: Decision, notes: list[str], done: tuple[str, Outcome]) -> None:
    """The health check's lines: its verdict and what it did on stdout, then each error."""
    report, result = decision.report, decision.verdict
    lines = node_modes.detail_lines(report, "gpurig healthcheck")
    lines += [f"gpurig healthcheck: {note}" for note in notes]
    words, outcome = done
    if result == "problem" and not decision.drain:
        words += f"; {_reported(decision)}"
    if outcome == "withheld":
        lines.insert(0, f"gpurig healthcheck: {words}")
    _say([f"gpurig healthcheck: {result}: {words}", *lines],
         syslog.LOG_INFO if result == "ok" else syslog.LOG_ERR, stdout=True)  # fmt: skip


def _reported(decision: Decision) -> str:
    ids = node_modes.acted_on(decision.report, decision.policy, "report")
    return f"not drained for {' '.join(ids)} (policy: report)"
