"""What a node contract does about each finding, and how many nodes it may hold drained: the
spec's `node_contracts` over the defaults of gpurig/data/node_modes.yaml.

- `actions`: per finding id or family (`gpu.*`), `drain` (an error drains the node), `report`
  (said on stderr, in syslog, the textfile and the exit status; never drained) or `off` (left
  out of the report). The spec's own entries win over the defaults; within each, an id's
  entry wins over its family's.
- `drain_budget`: before a node is drained, the nodes of its partitions already drained or down
  with gpurig's reason are counted; past `max_drained` (a count, or a share of the partition)
  or `same_id` nodes for one id (a spec error, not the nodes), the drain is withheld. Nothing
  frees the budget but a person resuming or fixing the drained nodes.

Pure: the node list comes from gpurig.node.slurm.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from gpurig.data.tables import table
from gpurig.report.render import HostReport

NodeAction = Literal["drain", "report", "off"]
ACTIONS: tuple[NodeAction, ...] = ("drain", "report", "off")
# A finding standing for several ids (a grouped `container.differs`) takes the strongest.
_STRENGTH = {"off": 0, "report": 1, "drain": 2}
FAMILY = ".*"


@dataclass(frozen=True)
class Policy:
    """The spec's actions over the defaults, and the drain budget."""

    declared: Mapping[str, NodeAction]
    defaults: Mapping[str, NodeAction]
    max_drained: int | str  # a count, or "N%" of the partition's nodes
    same_id: int

    def action(self, finding_id: str) -> NodeAction:
        """The action for one id: the spec's id, its family, then the defaults' id, family.
        An id no table names drains, as every error did before the policy."""
        family = finding_id.split(".", 1)[0] + FAMILY
        for layer in (self.declared, self.defaults):
            for key in (finding_id, family):
                if key in layer:
                    return layer[key]
        return "drain"

    def of(self, ids: Iterable[str]) -> NodeAction:
        """The strongest action of a finding's ids."""
        return max((self.action(i) for i in ids), key=_STRENGTH.__getitem__, default="drain")


def defaults() -> Mapping[str, Any]:
    """The node contracts' defaults: `actions` and `drain_budget` (node_modes.yaml)."""
    data = table("node_modes.yaml")
    return {"actions": data["actions"], "drain_budget": data["drain_budget"]}


def default_action(finding_id: str) -> NodeAction:
    """The action an id gets from the defaults alone (what `gpurig explain` shows)."""
    return policy({}).action(finding_id)


def policy(spec: Mapping[str, Any]) -> Policy:
    """The policy a (validated) spec declares, over the defaults."""
    declared = spec.get("node_contracts") or {}
    base = defaults()
    budget = {**base["drain_budget"], **(declared.get("drain_budget") or {})}
    return Policy(dict(declared.get("actions") or {}), base["actions"],
                  budget["max_drained"], int(budget["same_id"]))  # fmt: skip


def governed(report: HostReport, pol: Policy, never_off: frozenset[str]) -> HostReport:
    """The report without the findings whose action is `off`; `never_off`: ids that say the
    node was not read or judged, which no policy hides."""
    kept = [f for f in report.findings if f.id in never_off or pol.of(f.ids) != "off"]
    return replace(report, findings=kept)


def budget_nodes(max_drained: int | str, total: int) -> int:
    """The most nodes of a partition of `total` gpurig may hold drained: a count, or a share
    rounded up and at least 1."""
    if isinstance(max_drained, str):
        share = float(max_drained.rstrip("%"))
        return max(1, math.ceil(total * share / 100))
    return max_drained


@dataclass(frozen=True)
class Held:
    """A node of the cluster as the budget sees it: its partitions, and the ids of gpurig's
    reason where gpurig holds it drained or down (None where it does not)."""

    name: str
    partitions: frozenset[str]
    ids: frozenset[str] | None


def withheld(nodes: Sequence[Held], me: str, ids: Sequence[str], pol: Policy) -> str | None:
    """Why draining node `me` for `ids` is withheld, or None: the nodes (other than `me`)
    already held by gpurig in `me`'s partitions, for one of these ids past `same_id`, or in
    any one partition past its budget."""
    mine = next((n.partitions for n in nodes if n.name == me), frozenset())
    members = [n for n in nodes if n.partitions & mine]
    held = [n for n in members if n.name != me and n.ids is not None]
    for finding_id in ids:
        same = sum(1 for n in held if finding_id in (n.ids or ()))
        if same >= pol.same_id:
            return (f"drain withheld: {same} of {len(members)} nodes already drained by gpurig "
                    f"for {finding_id}: a spec error?")  # fmt: skip
    for partition in sorted(mine):
        total = sum(1 for n in members if partition in n.partitions)
        count = sum(1 for n in held if partition in n.partitions)
        limit = budget_nodes(pol.max_drained, total)
        if count >= limit:
            return (f"drain withheld: {count} of {total} nodes of partition {partition} already "
                    f"drained by gpurig (budget {limit})")  # fmt: skip
    return None
