"""The checks' one table (gpurig/data/checks.yaml) and the one way a check builds a finding.

Every check id has a row there: its severity, its remediation (what a renter or operator does),
its source, and the findings that explain it (`explained_by`): one cause, one finding. The GPU,
node, container and compatibility checks all build their findings with `found()`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpurig.data.tables import table
from gpurig.named_tuple import NamedTuple
from gpurig.spec.finding import Finding, Severity


def rules() -> dict[str, Any]:
    """gpurig/data/checks.yaml: rows, remediations, thresholds and the GPU tables, each sourced."""
    return table("checks.yaml")


class ByInput(NamedTuple):
    """One way an id's finding comes out where the reading decides it (an Xid's bucket, a
    threshold): its severity and remediation, and which inputs give them, as the check judges."""

    severity: Severity
    remediation: str
    when: str


def by_input(rows: Iterable[ByInput]) -> list[ByInput]:
    """`rows` with one severity and remediation joined into one row, errors first."""
    joined: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        joined.setdefault((row.severity, row.remediation), []).append(row.when)
    order = sorted(joined, key=lambda key: (key[0] != "error", key[1]))
    return [ByInput(severity, remedy, "; ".join(joined[severity, remedy]))  # type: ignore[arg-type]
            for severity, remedy in order]  # fmt: skip


def found(
    check_id: str,
    subject: str,
    message: str,
    expected: Any,
    actual: Any,
    fix: str,
    *,
    severity: Severity | None = None,
    remediation: str | None = None,
) -> Finding:
    """A check's finding from its table row: the row's severity and remediation unless a
    reading overrides them, and the fix ending in the remediation's words."""
    row = rules()["checks"][check_id]
    remedy = remediation or row["remediation"]
    how = rules()["remediations"][remedy]
    return Finding(
        check_id,
        severity or row["severity"],
        message,
        str(expected),
        str(actual),
        f"{fix}; {how}" if fix else how,
        remedy,
        subject,
    )


def one_per_cause(findings: Sequence[Finding]) -> list[Finding]:
    """The findings less those another finding on the same subject explains (the table's
    `explained_by`: a stopped socket explains an API that does not answer), and less repeats."""
    found_ids = {(f.subject, i) for f in findings for i in f.ids}
    kept: list[Finding] = []
    for finding in findings:
        row: Mapping[str, Any] = rules()["checks"].get(finding.id) or {}
        causes = row.get("explained_by") or []
        if finding in kept or any((finding.subject, cause) in found_ids for cause in causes):
            continue
        kept.append(finding)
    return kept
