"""What one concern's plan finds between the spec and the host: the converge acts on it, the
drift check reports it. One type for both, so they cannot disagree (DESIGN: one model)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpurig.compat import Finding, Severity


@dataclass(frozen=True)
class Change:
    """One difference: a stable id, what was expected and found, what the converge does.

    `refused` says the converge will not make it without an opt-in (a running container, a
    dirty checkout): `action` then says what it does instead and how to resolve it. `data`
    carries what the operation needs (paths, names); it is never rendered in a report.
    """

    id: str
    subject: str
    expected: str
    actual: str
    action: str
    severity: Severity = "error"
    refused: bool = False
    data: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def finding(self) -> Finding:
        if self.refused:
            message = f"{self.subject}: differs, and the converge will not change it"
            fix = self.action
        else:
            message = f"{self.subject}: differs from the spec"
            fix = f"run the converge: it will {self.action}"
        return Finding(self.id, self.severity, message, self.expected, self.actual, fix)
