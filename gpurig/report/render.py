"""Drift reports: a terminal table, the JSON contract, JUnit XML for CI, Markdown summaries.

Every format says the same per finding, a subject's findings together: what it is about (a
container, a file, a GPU), what the converge does about it, the values that differ (plain:
`512 GiB`, `core=0:0`), and the fix, once.

Pure functions from host reports to text, so every format is unit-tested without a host.
Findings quote host output, which is untrusted: each format escapes it its own way (the
table shows control characters as `\x1b`, Markdown escapes its syntax and HTML, JUnit keeps
only what XML 1.0 can hold; JSON escapes by itself).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from gpurig.spec.finding import ACTIONS, Finding, HostReport, as_dict
from gpurig.spec.pattern import lazy
from gpurig.spec.textsafe import visible
from gpurig.spec.words import counted

_COLOURS = {"error": "\033[31m", "warn": "\033[33m", "ok": "\033[32m"}
_RESET = "\033[0m"


def exit_code(reports: Sequence[HostReport]) -> int:
    """DESIGN's contract: 0 clean or warnings only, 1 drift or an unreachable host."""
    return 1 if any(r.failed for r in reports) else 0


def _fleet(reports: Sequence[HostReport]) -> dict[str, Mapping[str, Any]]:
    """The hosts the fleet view compares: reachable ones that reported facts (two or more)."""
    hosts = {r.name: r.facts for r in reports if r.reachable and r.facts}
    return hosts if len(hosts) > 1 else {}


def _fix(f: Finding) -> str:
    return f"[{f.remediation}] {f.fix}" if f.remediation else f.fix


def _headline(f: Finding) -> str:
    """What a finding is about and what the converge does about it, with its id."""
    return f"{f.subject or 'host'}: {ACTIONS[f.action]} ({f.id})"


def _what(f: Finding) -> list[str]:
    """A check's message, then expected and found: one line per field that differs."""
    said = [f.message] if f.action == "manual" else []
    if not f.differences:
        return [*said, f"expected {f.expected}; found {f.actual}"]
    return [*said, *(f"{d.field}: expected {d.expected}; found {d.actual}" for d in f.differences)]


def one_line(f: Finding) -> str:
    """A finding in the table's words on one line: what the converge and `up --local` say
    when they meet a cause drift explains."""
    return "; ".join([_headline(f), *_what(f), _fix(f)])


def to_json(reports: Sequence[HostReport]) -> str:
    """`{"hosts": [{"name", "reachable", "findings": [{"id", "severity", "message", "expected",
    "actual", "fix", "remediation", "subject", "action", "differences"}], "tries"}]}`."""
    hosts = [
        {
            "name": r.name,
            "reachable": r.reachable,
            "findings": [as_dict(f) for f in r.findings],
            "tries": r.tries,
        }
        for r in reports
    ]
    document: dict[str, Any] = {"hosts": hosts}
    if _fleet(reports):
        # only a fleet report needs the grouping (and compat's tables)
        from gpurig.report import fleet

        document["fleet"] = fleet.to_json(_fleet(reports))
    return json.dumps(document, indent=2) + "\n"


def _paint(text: str, severity: str, colour: bool) -> str:
    return f"{_COLOURS[severity]}{text}{_RESET}" if colour else text


def _columns(rows: Sequence[Sequence[str]], indent: str) -> list[str]:
    """FIELD, EXPECTED and FOUND, aligned."""
    table = [("FIELD", "EXPECTED", "FOUND"), *rows]
    widths = [max(len(row[i]) for row in table) for i in (0, 1)]
    return [f"{indent}{a:<{widths[0]}}  {b:<{widths[1]}}  {c}".rstrip() for a, b, c in table]


def finding_block(host: str, f: Finding, width: int = 0, colour: bool = False) -> list[str]:
    """One finding's lines in the table, as drift prints them (host names padded to `width`):
    the headline, a check's message, the values, the fix."""
    width = max(width, len(visible(host)))
    indent = " " * (width + 9)
    label = _paint(f"{f.severity:<5}", f.severity, colour)
    lines = [f"{visible(host):<{width}}  {label}  {visible(_headline(f))}"]
    if f.action == "manual":
        lines.append(indent + visible(f.message))
    if f.differences:
        rows = [[visible(v) for v in (d.field, d.expected, d.actual)] for d in f.differences]
        lines += _columns(rows, indent)
    else:
        lines.append(indent + visible(f"expected {f.expected}; found {f.actual}"))
    lines.append(indent + visible(f"fix: {_fix(f)}"))
    return lines


def to_table(
    reports: Sequence[HostReport], colour: bool = False, docs_url: str | None = None
) -> str:
    """A block per finding, a subject's blocks together: a headline (host, severity, subject,
    what the converge does, id), a check's message, the values, the fix; where there were
    findings, a last line naming `gpurig explain`, which says what an id means, and with
    `docs_url` (gpurig.report.docs_url) the first id's page."""
    width = max([len(visible(r.name)) for r in reports] or [0])
    lines = [line for r in reports for f in r.by_subject
             for line in finding_block(r.name, f, width, colour)]  # fmt: skip
    lines += [f"{visible(r.name):<{width}}  {_paint('ok', 'ok', colour)}"
              for r in reports if not r.findings]  # fmt: skip
    lines += [f"{visible(r.name):<{width}}  reached after {r.tries} tries"
              for r in reports if r.tries > 1 and r.reachable]  # fmt: skip
    failed = sum(r.failed for r in reports)
    lines.append(f"{counted(len(reports), 'host')}, {failed} with drift")
    ids = [f.id for r in reports for f in r.by_subject]
    hosts = _fleet(reports)
    if hosts:
        from gpurig.report import fleet

        lines += ["", "fleet:", fleet.render_table(hosts)]
        fleet_findings = fleet.findings(hosts)
        lines += [visible(f"warn   {f.id}  {f.message}: {f.actual}") for f in fleet_findings]
        ids += [f.id for f in fleet_findings]
    if ids:
        hint = f"what a finding means and what to do: gpurig explain ID (e.g. {visible(ids[0])})"
        if docs_url:
            from gpurig.report.docs_url import page

            hint += f" or its page, {visible(page(docs_url, ids[0]))}"
        lines.append(hint)
    return "\n".join(lines) + "\n"


def to_junit(reports: Sequence[HostReport], docs_url: str | None = None) -> str:
    """One testsuite, one testcase per host, one <failure> per error finding: its headline as
    the message, what differs and the fix as the text, and with `docs_url`
    (gpurig.report.docs_url) the id's page; warnings as the testcase's output."""
    import xml.etree.ElementTree as ET

    about = _pages(docs_url)

    failures = sum(1 for r in reports if r.failed)
    suite = ET.Element(
        "testsuite", name="gpurig drift", tests=str(len(reports)), failures=str(failures),
        errors="0", skipped="0",
    )  # fmt: skip
    for report in reports:
        case = ET.SubElement(
            suite, "testcase", classname="gpurig.checks.judge", name=_xml(report.name)
        )
        for f in report.by_subject:
            if f.severity == "error":
                failure = ET.SubElement(case, "failure", type=_xml(f.id))
                failure.set("message", _xml(_headline(f)))
                page = [f"docs: {about(f.id)}"] if docs_url else []
                failure.text = _xml("\n".join([*_what(f), f"fix: {_fix(f)}", *page]))
        warnings = [f"{_headline(f)}: {f.message}" + (f" (docs: {about(f.id)})" if docs_url else "")
                    for f in report.by_subject if f.severity == "warn"]  # fmt: skip
        if warnings:
            ET.SubElement(case, "system-out").text = _xml("\n".join(warnings))
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _pages(docs_url: str | None) -> Any:
    """A function from an id to its page under `docs_url`, percent-encoded
    (gpurig.report.docs_url.page); "" for every id without one."""
    if not docs_url:
        return lambda finding_id: ""
    from gpurig.report.docs_url import page

    return lambda finding_id: page(docs_url, finding_id)


def _xml(text: str) -> str:
    """What XML 1.0 can carry: tab and newline kept, every other unsafe character escaped
    (a CR would come back as a newline, an ESC would make the file unparseable)."""
    return visible(text, keep="\t\n")


# Markdown syntax and HTML a finding could use to become a link, markup or another cell.
_MARKDOWN = lazy(r"[\\`*_{}\[\]()#+!|~<>&]")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_IDENTIFIER = lazy(r"[A-Za-z0-9_.:/@+=-]+")


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, no markup, no HTML, unsafe characters shown."""
    return _MARKDOWN.sub(lambda m: _ENTITIES.get(m[0]) or f"\\{m[0]}", visible(text))


def _code(text: str) -> str:
    """A code span for a plain name or id; anything else (a backtick or `|` would end the span
    or the cell early) as escaped text."""
    return f"`{text}`" if _IDENTIFIER.fullmatch(text) else _cell(text)


def to_markdown(reports: Sequence[HostReport], docs_url: str | None = None) -> str:
    """A CI job summary: a verdict line, then per host with drift one row per finding (a
    subject's rows together): what it is about, what the converge does, what differs, the fix;
    with `docs_url` (gpurig.report.docs_url), each id a link to its page."""
    about = _pages(docs_url)

    def named(finding_id: str) -> str:
        return f"[{_code(finding_id)}]({about(finding_id)})" if docs_url else _code(finding_id)

    failed = [r for r in reports if r.failed]
    total = counted(len(reports), "host")
    verdict = "no drift" if not failed else f"drift on {len(failed)} of {total}"
    lines = [f"## gpurig drift: {verdict}", ""]
    for report in reports:
        if not report.findings:
            lines += [f"- {_code(report.name)}: ok", ""]
            continue
        lines += [
            f"### {_code(report.name)}" + ("" if report.reachable else " (unreachable)"),
            "",
            "| severity | subject | converge | id | what differs | fix |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for f in report.by_subject:
            cells = [_cell(f.severity), _cell(f.subject or "host"), _cell(ACTIONS[f.action]),
                     named(f.id), " · ".join(map(_cell, _what(f))), _cell(_fix(f))]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    hosts = _fleet(reports)
    if hosts:
        from gpurig.report import fleet

        lines += ["### Fleet", "", fleet.render_markdown(hosts), ""]
        lines += [f"- warn {named(f.id)}: {_cell(f.message)}: {_cell(f.actual)}"
                  for f in fleet.findings(hosts)]  # fmt: skip
    return "\n".join(lines)


def render(
    reports: Sequence[HostReport], fmt: str, colour: bool = False, docs_url: str | None = None
) -> str:
    """The report in one of FORMATS (gpurig.report.formats); with `docs_url`, a checked
    documentation address (gpurig.report.docs_url), its finding ids lead to their pages."""
    if fmt == "table":
        return to_table(reports, colour, docs_url)
    if fmt == "json":
        return to_json(reports)
    return to_junit(reports, docs_url) if fmt == "junit" else to_markdown(reports, docs_url)
