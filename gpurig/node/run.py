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
from pathlib import Path
from typing import TextIO

from gpurig.checks.judge import Scope
from gpurig.node import modes as node_modes
from gpurig.node.read import drift_local
from gpurig.read.local import StartedRead
from gpurig.report.render import HostReport, render
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
    textfile: Path | None,
    ahead: StartedRead | None = None,
) -> int:
    """Read and judge this node as the mode says, act, and return the exit status."""
    m = node_modes.mode(name)
    report = drift_local(host, scope(m), timeout=m.read_seconds, ahead=ahead)
    duration = time.monotonic() - started
    if output is not None:
        output.write(render([report], fmt))
    if textfile is not None:
        from gpurig.report.textfile import written

        written(textfile, [report], duration, False, node_modes.checked_ids(m))
    result = node_modes.verdict(report)
    if name == "npd":
        print(node_modes.npd_line(report, m))
    elif name == "prolog":
        # slurmd says which of the two runs it (and keeps an Epilog's output in its log).
        context = "epilog" if os.environ.get("SLURM_SCRIPT_CONTEXT") == "epilog_slurmd" else name
        lines = node_modes.detail_lines(report, f"gpurig {context}")
        if result == "problem":
            what = "refused the job" if context == "prolog" else "problem after the job"
            lines.insert(0, f"gpurig {context}: {what}: {_act(report, resume=False)}")
        _say(lines, syslog.LOG_INFO if result == "ok" else syslog.LOG_ERR)
    else:
        lines = node_modes.detail_lines(report, "gpurig healthcheck")
        done = _act(report, resume=True)
        _say([f"gpurig healthcheck: {result}: {done}", *lines],
             syslog.LOG_INFO if result == "ok" else syslog.LOG_ERR, stdout=True)  # fmt: skip
        if done.startswith("cannot act"):
            return node_modes.exit_status(m, "unknown")
    return node_modes.exit_status(m, result)


def _act(report: HostReport, resume: bool) -> str:
    """Drain this node (or, with `resume`, resume it) through scontrol as the verdict and the
    node's state say (node_modes.health_action); what was done, in words.

    The prolog drains too, before it exits 1: slurmctld then keeps gpurig's reason (it gives
    its own, "Prolog error", only to a node not drained yet), so the health check can resume
    the node once it is clean."""
    from gpurig.node import slurm

    try:
        node = slurm.node_name()
        action = node_modes.health_action(slurm.show(node), report)
        if action is not None and action[0] == "resume" and not resume:
            action = None
        slurm.apply(node, action)
    except slurm.SlurmError as exc:
        return f"cannot act: {exc}"
    if action is None:
        return f"{node} left as it is"
    return f"drained {node}: {action[1]}" if action[0] == "drain" else f"resumed {node}"
