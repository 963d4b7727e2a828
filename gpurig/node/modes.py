"""The node contracts: `gpurig drift --local --mode prolog|healthcheck|npd`, the same one read
and judgement as drift, shaped for the engine that runs gpurig on each node of a cluster.

- `prolog` (SLURM Prolog or Epilog; slurmd runs it as root with no PATH, before each job): a
  fast subset; on an error it drains the node with gpurig's reason (SLURM then keeps it) and
  exits 1, so SLURM requeues the job held; each error on stderr and in syslog.
- `healthcheck` (SLURM HealthCheckProgram; slurmd runs it periodically and takes no action):
  everything drift checks; the program drains its node itself with a `gpurig: ` reason on an
  error, and resumes a node only when the reason is its own (see `health_action`).
- `npd` (node-problem-detector custom plugin): one line of at most 80 characters on stdout,
  exit 0 OK, 1 problem, 2 could not check.

"Could not check" (the read timed out or failed, a concern could not be parsed, a bug in
gpurig, an invalid spec file) never drains a node or fails a job: a spec pushed to every node
with a mistake must not drain the cluster. It is said on stderr, in syslog, as exit 2 where
the engine tells it apart (npd, healthcheck), and as `gpurig_drift_last_run_success 0` in the
textfile, for an alert.

Pure: which reads and ids a mode has, the verdict, its lines, the drain reason and the action
on a node's SLURM state; running `scontrol` is gpurig.node.slurm's.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Literal, Optional

from gpurig.checks.all import CHECK_IDS
from gpurig.checks.judge import Scope
from gpurig.checks.node_actions import CONNECT_CHECKS, UNCHECKED, NodeAction, Policy
from gpurig.data.tables import table
from gpurig.named_tuple import NamedTuple
from gpurig.node.policy import Held
from gpurig.plans import CHANGE_IDS, PLANS
from gpurig.spec.finding import Finding, HostReport
from gpurig.spec.pattern import lazy
from gpurig.spec.words import counted

Verdict = Literal["ok", "problem", "unknown"]

# The plan that reports each change id: by the id's first word (one plan per concern), but for
# the engine's daemon.json key that names the toolkit's runtime.
PLAN_OF_ID = {"toolkit.runtime": "engine", "tools.missing": "packages"}
PLAN_OF_PREFIX = {
    "packages": "packages", "secret": "secrets", "core_dumps": "core_dumps", "repo": "repos",
    "engine": "engine", "compose": "compose", "driver": "driver", "toolkit": "toolkit",
    "cleanup": "cleanup", "container": "containers",
}  # fmt: skip
# Checks judged on what is read inside declared containers, or declared environments.
CONTAINER_CHECKS = frozenset(
    {"container.restarting", "container.oom_kill", "compat.driver_cuda", "compat.torch_arch"}
)
IMPORT_CHECKS = frozenset({"env.imports", "env.imports_unchecked"})


class Mode(NamedTuple):
    """One contract: its time (whole run, and the read within it) and what it reads (`scope`:
    the plans, containers and imports, each call bounded by the read's time)."""

    name: str
    limit_seconds: float
    read_seconds: int
    scope: Scope
    max_output: int | None = None


@cache
def mode(name: str) -> Mode:
    """The mode `name` from gpurig/data/node_modes.yaml."""
    row = table("node_modes.yaml")["modes"][name]
    plans = frozenset(row["plans"])
    unknown = plans - {plan for plan, _ in PLANS}
    if unknown:
        raise ValueError(f"node_modes.yaml: {name}: no such plan: {sorted(unknown)}")
    read_seconds = int(row["read_seconds"])
    scope = Scope(plans, bool(row["containers"]), bool(row["imports"]), bound=read_seconds)
    return Mode(name, float(row["limit_seconds"]), read_seconds, scope, row.get("max_output"))


def plan_of(change_id: str) -> str:
    return PLAN_OF_ID.get(change_id) or PLAN_OF_PREFIX[change_id.split(".", 1)[0]]


def checked_ids(m: Mode) -> tuple[str, ...]:
    """Every id the mode can report: its plans' change ids and the checks over what it reads."""
    changes = {i for i in CHANGE_IDS if plan_of(i) in m.scope.plans}
    checks = set(CHECK_IDS) - CONNECT_CHECKS
    if not m.scope.containers:
        checks -= CONTAINER_CHECKS
    if not m.scope.imports:
        checks -= IMPORT_CHECKS
    return tuple(sorted(changes | checks))


def errors(report: HostReport) -> list[Finding]:
    """The report's errors about the node itself (not about reading it)."""
    return [f for f in report.findings if f.severity == "error" and f.id not in UNCHECKED]


def acted_on(report: HostReport, pol: Policy, action: NodeAction) -> list[str]:
    """The distinct ids of the report's errors whose action is `action`, in order."""
    return list(dict.fromkeys(f.id for f in errors(report) if pol.of(f.ids) == action))


def unchecked(report: HostReport) -> bool:
    """Whether part of the node was not read or not judged."""
    return any(f.id in UNCHECKED for f in report.findings)


def verdict(report: HostReport) -> Verdict:
    """problem: an error was found; unknown: none, but the node was not wholly read and judged
    (a problem found in the part that was read still counts); ok: read, judged, no error."""
    if errors(report):
        return "problem"
    if not report.reachable or any(f.id in UNCHECKED for f in report.findings):
        return "unknown"
    return "ok"


def unchecked_reason(report: HostReport) -> str:
    """Why the node could not be checked, in a few words (no host text)."""
    ids = sorted({f.id for f in report.findings if f.id in UNCHECKED})
    return ", ".join(ids) or "not read"


# Exit status per verdict. The prolog's unknown is 0: it must not drain or hold a job for a
# check that did not run; the health check and NPD tell it apart (2: NPD's Unknown).
EXIT = {
    "prolog": {"ok": 0, "problem": 1, "unknown": 0},
    "healthcheck": {"ok": 0, "problem": 1, "unknown": 2},
    "npd": {"ok": 0, "problem": 1, "unknown": 2},
}


def exit_status(m: Mode, result: Verdict) -> int:
    return EXIT[m.name][result]


def summary(ids: Sequence[str], budget: int) -> str:
    """`id1 id2 (+N more)`, the distinct ids in order, within `budget` characters."""
    distinct = list(dict.fromkeys(ids))
    for shown in range(len(distinct), 0, -1):
        rest = len(distinct) - shown
        text = " ".join(distinct[:shown]) + (f" (+{rest} more)" if rest else "")
        if len(text) <= budget:
            return text
    return counted(len(distinct), "finding")


def npd_line(report: HostReport, m: Mode) -> str:
    """node-problem-detector's status message: one line, at most `max_output` characters."""
    limit = m.max_output or 80
    result = verdict(report)
    if result == "ok":
        line = "gpurig: ok"
    elif result == "problem":
        ids = [f.id for f in errors(report)]
        line = f"gpurig: {summary(ids, limit - len('gpurig: '))}"
    else:
        line = f"gpurig: could not check: {unchecked_reason(report)}"
    return line[:limit]


def detail_lines(report: HostReport, prefix: str) -> list[str]:
    """One line per error (its id and message, control characters shown as escapes), or why
    the node could not be checked: for stderr and syslog."""
    from gpurig.spec.textsafe import visible

    result = verdict(report)
    if result == "ok":
        return [f"{prefix}: ok"]
    if result == "unknown":
        why = [visible(f.message)[:300] for f in report.findings if f.id in UNCHECKED]
        return [f"{prefix}: could not check: {text}" for text in why or ["not read"]]
    return [f"{prefix}: {f.id}: {visible(f.message)[:300]}" for f in errors(report)]


# What `scontrol update` gets as the node's reason: gpurig's own prefix, then ids only (never
# host text), within a length every tool shows whole.
REASON_PREFIX = "gpurig: "
REASON_LENGTH = 120


def drain_reason(ids: Sequence[str]) -> str:
    return REASON_PREFIX + summary(ids, REASON_LENGTH - len(REASON_PREFIX))


_REASON_ID = lazy(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+")


def reason_ids(reason: str | None) -> frozenset[str] | None:
    """The ids of a `gpurig: ` reason (the ids drain_reason wrote); None for another reason."""
    if reason is None or not reason.startswith(REASON_PREFIX):
        return None
    words = reason.removeprefix(REASON_PREFIX).split()
    return frozenset(w for w in words if _REASON_ID.fullmatch(w))


class NodeState(NamedTuple):
    """A node as `scontrol show node --oneliner` prints it: its state flags and reason."""

    name: str
    flags: frozenset[str]
    reason: str | None
    partitions: frozenset[str] = frozenset()

    @property
    def drained(self) -> bool:
        """Drained or draining: the DRAIN flag, whatever the base state."""
        return "DRAIN" in self.flags

    @property
    def held(self) -> Held:
        """The node as the drain budget counts it: held by gpurig when drained or down with
        gpurig's reason."""
        ours = self.drained or "DOWN" in self.flags
        return Held(self.name, self.partitions, reason_ids(self.reason) if ours else None)


_NODE = lazy(r"NodeName=(\S+) ")
_STATE = lazy(r" State=([A-Z_+*]+) ")
# The reason, then slurmctld's ` [user@time]`; the reason itself may hold spaces and brackets.
_REASON = lazy(r" Reason=(.*?) \[[A-Za-z0-9._-]+@[0-9T:-]+\]")
_PARTITIONS = lazy(r" Partitions=(\S+)")


def parse_nodes(text: str) -> list[NodeState]:
    """`scontrol show node --oneliner`: one line per node; ValueError for any other shape."""
    nodes = [_node(line) for line in text.splitlines() if line.strip()]
    if not nodes or len({n.name for n in nodes}) != len(nodes):
        raise ValueError("expected one line per node")
    return nodes


def _node(line: str) -> NodeState:
    name, state = _NODE.match(line), _STATE.search(line)
    if name is None or state is None:
        raise ValueError("no NodeName= or State= in scontrol's line")
    flags = frozenset(flag.rstrip("*") for flag in state.group(1).split("+"))
    reason, partitions = _REASON.search(line), _PARTITIONS.search(line)
    parts = frozenset(partitions.group(1).split(",")) if partitions else frozenset()
    return NodeState(name.group(1), flags, reason.group(1) if reason else None, parts)


Action = Optional[tuple[Literal["drain", "resume"], str]]


def health_action(node: NodeState, report: HostReport, drain: Sequence[str]) -> Action:
    """What a contract does to its node, given the errors whose action is `drain`:

    - any: drain with gpurig's reason for them, unless the node is already drained with that
      reason, or drained by someone else (an operator's or SLURM's reason is never replaced);
    - none, the node wholly read and judged: resume a node drained with gpurig's reason (its
      errors are gone, or the policy reports them now), and nothing else;
    - none, the node not wholly read: nothing (a check that did not run proves nothing)."""
    ours = node.reason is not None and node.reason.startswith(REASON_PREFIX)
    if drain:
        reason = drain_reason(drain)
        if node.drained and (not ours or node.reason == reason):
            return None
        return ("drain", reason)
    if report.reachable and not unchecked(report) and node.drained and ours:
        return ("resume", "")
    return None
