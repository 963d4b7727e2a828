"""Drift reports: a terminal table, the JSON contract, JUnit XML for CI, Markdown summaries.

Pure functions from host reports to text, so every format is unit-tested without a host.
Findings quote host output, which is untrusted: each format escapes it its own way (the
table shows control characters as `\x1b`, Markdown escapes its syntax and HTML, JUnit keeps
only what XML 1.0 can hold; JSON escapes by itself).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only annotations: the CLI imports FORMATS without the compat tables
    from gpurig.compat import Finding
from gpurig.textsafe import visible

FORMATS = ("table", "json", "junit", "markdown")
_COLOURS = {"error": "\033[31m", "warn": "\033[33m", "ok": "\033[32m"}
_RESET = "\033[0m"


@dataclass(frozen=True)
class HostReport:
    """One host's outcome: reachable or not, and its findings."""

    name: str
    reachable: bool
    findings: list[Finding] = field(default_factory=list)
    # What must match across a multi-node job (driver, CUDA, kernel, toolkit, images, code).
    facts: Mapping[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """Drift for CI: unreachable, or any error finding (warnings alone pass)."""
        return not self.reachable or any(f.severity == "error" for f in self.findings)


def exit_code(reports: Sequence[HostReport]) -> int:
    """DESIGN's contract: 0 clean or warnings only, 1 drift or an unreachable host."""
    return 1 if any(r.failed for r in reports) else 0


def _finding_dict(f: Finding) -> dict[str, str]:
    # The message names the finding's subject (which checkout, container, file, GPU).
    row = {"id": f.id, "severity": f.severity, "message": f.message, "expected": f.expected,
           "actual": f.actual, "fix": f.fix}  # fmt: skip
    if f.remediation:
        row["remediation"] = f.remediation
    return row


def _fleet(reports: Sequence[HostReport]) -> dict[str, Mapping[str, Any]]:
    """The hosts the fleet view compares: reachable ones that reported facts (two or more)."""
    hosts = {r.name: r.facts for r in reports if r.reachable and r.facts}
    return hosts if len(hosts) > 1 else {}


def _fix(f: Finding) -> str:
    return f"[{f.remediation}] {f.fix}" if f.remediation else f.fix


def to_json(reports: Sequence[HostReport]) -> str:
    """`{"hosts": [{"name", "reachable", "findings": [{"id", "severity", "message", ...}]}]}`."""
    hosts = [
        {
            "name": r.name,
            "reachable": r.reachable,
            "findings": [_finding_dict(f) for f in r.findings],
        }
        for r in reports
    ]
    document: dict[str, Any] = {"hosts": hosts}
    if _fleet(reports):
        from gpurig import fleet  # only a fleet report needs the grouping (and compat's tables)

        document["fleet"] = fleet.to_json(_fleet(reports))
    return json.dumps(document, indent=2) + "\n"


def _paint(text: str, severity: str, colour: bool) -> str:
    return f"{_COLOURS[severity]}{text}{_RESET}" if colour else text


def to_table(reports: Sequence[HostReport], colour: bool = False) -> str:
    """Aligned rows (host, severity, id, expected -> actual) with each fix underneath."""
    rows = [
        tuple(map(visible, (r.name, f.severity, f.id, f"expected {f.expected}, got {f.actual}",
                            _fix(f))))
        for r in reports
        for f in r.findings
    ]  # fmt: skip
    clean = [visible(r.name) for r in reports if not r.findings]
    width_host = max([len(r.name) for r in reports] or [0])
    width_id = max([len(row[2]) for row in rows] or [0])
    lines = []
    for host, severity, fid, detail, fix in rows:
        label = _paint(f"{severity:<5}", severity, colour)
        lines.append(f"{host:<{width_host}}  {label}  {fid:<{width_id}}  {detail}")
        lines.append(f"{'':<{width_host}}         {'':<{width_id}}  fix: {fix}")
    lines += [f"{name:<{width_host}}  {_paint('ok', 'ok', colour)}" for name in clean]
    failed = sum(r.failed for r in reports)
    lines.append(f"{len(reports)} hosts, {failed} with drift")
    hosts = _fleet(reports)
    if hosts:
        from gpurig import fleet

        lines += ["", "fleet:", fleet.render_table(hosts)]
        lines += [visible(f"warn   {f.id}  {f.message}: {f.actual}") for f in fleet.findings(hosts)]
    return "\n".join(lines) + "\n"


def to_junit(reports: Sequence[HostReport]) -> str:
    """One testsuite, one testcase per host, one <failure> per error finding."""
    failures = sum(1 for r in reports if r.failed)
    suite = ET.Element(
        "testsuite", name="gpurig drift", tests=str(len(reports)), failures=str(failures),
        errors="0", skipped="0",
    )  # fmt: skip
    for report in reports:
        case = ET.SubElement(suite, "testcase", classname="gpurig.drift", name=_xml(report.name))
        errors = [f for f in report.findings if f.severity == "error"]
        for f in errors:
            failure = ET.SubElement(case, "failure", type=_xml(f.id), message=_xml(f.message))
            failure.text = _xml(f"expected: {f.expected}\nactual: {f.actual}\nfix: {f.fix}")
        warnings = [f"{f.id}: {f.message}" for f in report.findings if f.severity == "warn"]
        if warnings:
            ET.SubElement(case, "system-out").text = _xml("\n".join(warnings))
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _xml(text: str) -> str:
    """What XML 1.0 can carry: tab and newline kept, every other unsafe character escaped
    (a CR would come back as a newline, an ESC would make the file unparseable)."""
    return visible(text, keep="\t\n")


# Markdown syntax and HTML a finding could use to become a link, markup or another cell.
_MARKDOWN = re.compile(r"[\\`*_{}\[\]()#+!|~<>&]")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_IDENTIFIER = re.compile(r"[A-Za-z0-9_.:/@+=-]+")


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, no markup, no HTML, unsafe characters shown."""
    return _MARKDOWN.sub(lambda m: _ENTITIES.get(m[0]) or f"\\{m[0]}", visible(text))


def _code(text: str) -> str:
    """A code span for a plain name or id; anything else (a backtick or `|` would end the span
    or the cell early) as escaped text."""
    return f"`{text}`" if _IDENTIFIER.fullmatch(text) else _cell(text)


def to_markdown(reports: Sequence[HostReport]) -> str:
    """A CI job summary: a verdict line, then one table of findings per host with drift."""
    failed = [r for r in reports if r.failed]
    verdict = "no drift" if not failed else f"drift on {len(failed)} of {len(reports)} hosts"
    lines = [f"## gpurig drift: {verdict}", ""]
    for report in reports:
        if not report.findings:
            lines += [f"- {_code(report.name)}: ok", ""]
            continue
        lines += [
            f"### {_code(report.name)}" + ("" if report.reachable else " (unreachable)"),
            "",
            "| severity | id | expected | actual | fix |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [
            "| "
            + " | ".join(
                [_cell(f.severity), _code(f.id), *map(_cell, (f.expected, f.actual, _fix(f)))]
            )
            + " |"
            for f in report.findings
        ]
        lines.append("")
    hosts = _fleet(reports)
    if hosts:
        from gpurig import fleet

        lines += ["### Fleet", "", fleet.render_markdown(hosts), ""]
        lines += [f"- warn {_code(f.id)}: {_cell(f.message)}: {_cell(f.actual)}"
                  for f in fleet.findings(hosts)]  # fmt: skip
    return "\n".join(lines)


def render(reports: Sequence[HostReport], fmt: str, colour: bool = False) -> str:
    """The report in one of FORMATS."""
    renderers = {"json": to_json, "junit": to_junit, "markdown": to_markdown}
    if fmt == "table":
        return to_table(reports, colour)
    return renderers[fmt](reports)
