"""What a node contract does about each finding, and how many nodes it may hold drained: the
spec's `node_contracts` over the defaults of gpurig/data/node_modes.yaml.

- `actions` (gpurig.checks.node_actions, which the catalogue shows too): per finding id or
  family (`gpu.*`), `drain` (an error drains the node), `report` (said on stderr, in syslog,
  the textfile and the exit status; never drained) or `off` (left out of the report).
- `drain_budget`: before a node is drained, the nodes of its partitions already drained or down
  with gpurig's reason are counted; past `max_drained` (a count, or a share of the partition)
  or `same_id` nodes for one id (a spec error, not the nodes), the drain is withheld. Nothing
  frees the budget but a person resuming or fixing the drained nodes.

Pure: the node list comes from gpurig.node.slurm.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpurig.checks.node_actions import Policy
from gpurig.named_tuple import NamedTuple
from gpurig.spec.finding import HostReport


def governed(report: HostReport, pol: Policy, never_off: frozenset[str]) -> HostReport:
    """The report without the findings whose action is `off`; `never_off`: ids that say the
    node was not read or judged, which no policy hides."""
    kept = [f for f in report.findings if f.id in never_off or pol.of(f.ids) != "off"]
    return report._replace(findings=kept)


def budget_nodes(max_drained: int | str, total: int) -> int:
    """The most nodes of a partition of `total` gpurig may hold drained: a count, or a share
    rounded up and at least 1."""
    if isinstance(max_drained, str):
        share = float(max_drained.rstrip("%"))
        return max(1, math.ceil(total * share / 100))
    return max_drained


class Held(NamedTuple):
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
