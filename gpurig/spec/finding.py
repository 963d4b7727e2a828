"""One finding: one thing on a host that is wrong (a container, a checkout, a file, a GPU, a
unit), what the converge does about it, and how it differs from what was declared or expected;
and one host's report: reachable or not, and its findings.

A plan's changes (gpurig.plans.change) and the checks (gpurig.checks.all) both end as
findings, so every report format (gpurig.report.render) labels, groups and prints them one way.
The records sit below the plans and the checks that make them, and the judge that makes a
host's report (gpurig.checks.judge) below the formats that print it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal

from gpurig.named_tuple import NamedTuple

Severity = Literal["error", "warn"]
# What the converge does about it: makes it right ("converge"), will not without an opt-in or
# the user's own fix ("refused": `fix` says why and how), or cannot: health, compatibility,
# headroom ("manual": `remediation` says who acts).
Action = Literal["converge", "refused", "manual"]
ACTIONS: dict[str, str] = {
    "converge": "the converge fixes it",
    "refused": "the converge refuses",
    "manual": "the converge cannot fix it",
}


class Difference(NamedTuple):
    """One field of the subject that is not as declared, both values as a person reads them;
    `id` is the converge's own id for that change (`container.shm_size`), where it has one."""

    field: str
    expected: str
    actual: str
    id: str = ""


class Finding(NamedTuple):
    """One broken or risky thing on a host, with what was expected and how to fix it."""

    id: str
    severity: Severity
    message: str
    expected: str = ""
    actual: str = ""
    fix: str = ""
    # restart-job | reset-gpu | reboot | reconverge | contact-provider | ... (the `remediations`
    # of gpurig/data/checks.yaml).
    remediation: str = ""
    subject: str = ""  # what it is about: `container train`, `/etc/docker/daemon.json`, `GPU ...`
    action: Action = "manual"
    differences: tuple[Difference, ...] = ()

    @property
    def ids(self) -> tuple[str, ...]:
        """Every id this finding stands for: its differences' own, else its own (metrics count
        the converge's ids, whatever a report groups them under)."""
        return tuple(d.id for d in self.differences if d.id) or (self.id,)


def as_dict(finding: Finding) -> dict[str, Any]:
    """The JSON contract's finding: the first keys as they always were, then what it is about,
    what the converge does, and its differences (keys are only ever added)."""
    row: dict[str, Any] = {
        "id": finding.id, "severity": finding.severity, "message": finding.message,
        "expected": finding.expected, "actual": finding.actual, "fix": finding.fix,
    }  # fmt: skip
    if finding.remediation:
        row["remediation"] = finding.remediation
    row["subject"] = finding.subject
    row["action"] = finding.action
    row["differences"] = [d._asdict() for d in finding.differences]
    return row


class HostReport(NamedTuple):
    """One host's outcome: reachable or not, and its findings."""

    name: str
    reachable: bool
    findings: Sequence[Finding] = ()
    # What must match across a multi-node job (driver, CUDA, kernel, toolkit, images, code).
    facts: Mapping[str, Any] = MappingProxyType({})
    tries: int = 1  # connections tried: more than one where the host blinked first

    @property
    def failed(self) -> bool:
        """Drift for CI: unreachable, or any error finding (warnings alone pass)."""
        return not self.reachable or any(f.severity == "error" for f in self.findings)

    @property
    def by_subject(self) -> list[Finding]:
        """Its findings with each subject's together, subjects in the order they first appear."""
        first: dict[str, int] = {}
        for n, f in enumerate(self.findings):
            first.setdefault(f.subject, n)
        return sorted(self.findings, key=lambda f: first[f.subject])
