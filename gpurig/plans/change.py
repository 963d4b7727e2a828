"""What one concern's plan finds between the spec and the host: the converge acts on it, the
drift check reports it. One type for both, so they cannot disagree (DESIGN: one model)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from gpurig.named_tuple import NamedTuple
from gpurig.spec.finding import Difference, Finding, Severity


class Change(NamedTuple):
    """One difference: a stable id, what was expected and found, what the converge does.

    `subject` is the thing that differs (`container train`, a file, a checkout, a unit) and
    `field` the part of it (`shm_size`, `mode`), if any. `refused` says the converge will not
    make it without an opt-in (a running container, a dirty checkout): `action` then says what
    it does instead and how to resolve it. `data` carries what the operation needs (paths,
    names); it is never rendered in a report.
    """

    id: str
    subject: str
    expected: str
    actual: str
    action: str
    severity: Severity = "error"
    refused: bool = False
    field: str = ""
    data: Mapping[str, Any] = MappingProxyType({})

    @property
    def what(self) -> str:
        """Subject and field, as the converge names a refused change."""
        return f"{self.subject} {self.field}" if self.field else self.subject


def findings(changes: Sequence[Change]) -> list[Finding]:
    """The changes as drift reports them: one finding per subject (a recreated container, a
    file, a checkout) and verdict, its fields as differences, what the converge does said once.
    The converge's own ids stay on the differences."""
    groups: dict[tuple[str, bool], list[Change]] = {}
    for change in changes:
        groups.setdefault((change.subject, change.refused), []).append(change)
    return [_finding(group) for group in groups.values()]


def _finding(group: Sequence[Change]) -> Finding:
    first = group[0]
    ids = list(dict.fromkeys(c.id for c in group))
    # One id for the whole subject: the change's own, or `<concern>.differs` for several.
    finding_id = ids[0] if len(ids) == 1 else f"{ids[0].split('.')[0]}.differs"
    differences = tuple(Difference(c.field, c.expected, c.actual, c.id) for c in group)
    if len(group) == 1:
        expected, actual = first.expected, first.actual
        differences = differences if first.field else ()
    else:
        expected = "; ".join(f"{c.field or c.id}: {c.expected}" for c in group)
        actual = "; ".join(f"{c.field or c.id}: {c.actual}" for c in group)
    fields = ", ".join(c.field for c in group if c.field)
    what = f"{first.subject}: {fields}" if fields else first.subject
    verb = "differ" if len(group) > 1 else "differs"
    actions = "; ".join(dict.fromkeys(c.action for c in group))
    severity: Severity = "error" if any(c.severity == "error" for c in group) else "warn"
    if first.refused:
        message = f"{what} {verb} from the spec, and the converge will not change it"
        return Finding(finding_id, severity, message, expected, actual, actions, "by-hand",
                       first.subject, "refused", differences)  # fmt: skip
    message = f"{what} {verb} from the spec"
    fix = f"run the converge: it will {actions}"
    return Finding(finding_id, severity, message, expected, actual, fix, "reconverge",
                   first.subject, "converge", differences)  # fmt: skip
