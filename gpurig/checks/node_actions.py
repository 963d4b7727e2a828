"""What a node contract does about each finding id: `drain`, `report` or `off`, from the spec's
`node_contracts.actions` over the defaults of gpurig/data/node_modes.yaml. In the core, below
both its readers: the findings catalogue (gpurig.report.explain: `gpurig explain`, the docs)
shows each id's default; the contracts apply it (gpurig.node.policy, with the drain budget).

The spec's own entries win over the defaults; within each, an id's entry wins over its
family's (`gpu.*`: every id of that first word).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from gpurig.checks.all import NOT_READ, known_ids
from gpurig.data.tables import table
from gpurig.named_tuple import NamedTuple

NodeAction = Literal["drain", "report", "off"]
FAMILY = ".*"
# A finding standing for several ids (a grouped `container.differs`) takes the strongest.
_STRENGTH = {"off": 0, "report": 1, "drain": 2}
# Findings that say the node, or part of it, was not read or not judged (NOT_READ, and a bug
# in gpurig met while judging): no verdict of clean, and no policy hides them.
UNCHECKED = NOT_READ | {"gpurig.internal_error"}
# Checks a local read never reports: they are about connecting to a host.
CONNECT_CHECKS = frozenset({"host.unreachable", "host.key_changed", "host.sudo_password"})


def governed_ids() -> tuple[str, ...]:
    """The ids a spec's `node_contracts.actions` may name (the schema's findingSelector): every
    id a contract reports, but those that say the node was not read or judged."""
    return tuple(sorted(set(known_ids()) - UNCHECKED - CONNECT_CHECKS))


class Policy(NamedTuple):
    """The spec's actions over the defaults, and the drain budget (gpurig.node.policy)."""

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


def policy(spec: Mapping[str, Any]) -> Policy:
    """The policy a (validated) spec declares, over the defaults."""
    declared = spec.get("node_contracts") or {}
    data = table("node_modes.yaml")
    budget = {**data["drain_budget"], **(declared.get("drain_budget") or {})}
    return Policy(dict(declared.get("actions") or {}), data["actions"],
                  budget["max_drained"], int(budget["same_id"]))  # fmt: skip


def default_action(finding_id: str) -> NodeAction | None:
    """The action an id gets from the defaults alone; None for an id no contract governs."""
    return policy({}).action(finding_id) if finding_id in governed_ids() else None
