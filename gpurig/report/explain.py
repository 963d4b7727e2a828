"""The findings catalogue: what each id means and what to do, for `gpurig explain` and the docs.

The words are gpurig/data/findings.yaml's; every fact beside them comes from where it is kept:
severity, remediation and source from gpurig/data/checks.yaml (checks and the fleet view), or,
where the reading decides them, from the rows the check itself judges by (BY_INPUT), a
change's severity from its plan (gpurig.plans.severity), the ids from the lists the plans,
checks and fleet view hold complete. So a new id without its text fails a test and the docs
build, and no fact is written twice.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpurig.checks import compat, gpu, interconnect, node
from gpurig.checks.all import known_ids
from gpurig.checks.node_actions import default_action, policy
from gpurig.checks.rules import ByInput, rules
from gpurig.data.tables import table
from gpurig.plans import CHANGE_IDS
from gpurig.plans import severity as change_severity
from gpurig.report import fleet

GROUPED = ".differs"
# The concerns whose plan can give one subject two of its ids, so drift reports them as one
# `<concern>.differs` finding: a container's fields, daemon.json's keys and the engine's units,
# a checkout's, a secret file's mode and owner, the toolkit's. The others give each id a
# subject of its own (cleanup's paths, core_dumps' files, the driver's packages and files) or
# have one id (compose, packages, tools).
GROUPED_CONCERNS = ("container", "engine", "repo", "secret", "toolkit")
# The ids whose severity or remediation the reading decides, each with the rows its check
# judges by, built from the same tables: the page and `gpurig explain` show them all.
BY_INPUT: dict[str, Callable[[], list[ByInput]]] = {
    "compat.driver_cuda": compat.driver_cuda_by_input,
    "compat.torch_arch": compat.torch_arch_by_input,
    "gpu.xid": gpu.xid_by_input,
    "gpu.recovery_action": gpu.recovery_by_input,
    "gpu.sxid": interconnect.sxid_by_input,
    "host.cgroup_leak": lambda: node.level_by_input("host.cgroup_leak", "cgroups", "cgroups"),
    "host.percpu_memory": lambda: node.level_by_input("host.percpu_memory", "percpu_gb", "GB"),
}
# The words' keys in findings.yaml, with their headings, in the order a page shows them.
SECTIONS = {
    "means": "What it means",
    "matters": "Why it matters",
    "fix": "What to do",
    "limits": "Known limits",
}


@dataclass(frozen=True)
class Entry:
    """One id's catalogue entry: its words, and the facts the tables keep about it."""

    id: str
    summary: str
    words: Mapping[str, str]  # SECTIONS' keys that the entry has, in SECTIONS' order
    severity: str  # "error" or "warn"; "error or warn" for a grouped finding
    remediation: str  # "key: what it says", from checks.yaml's remediations
    source: str  # the check's source, or the plan that emits the change
    example: str = ""  # what `gpurig drift` printed for it on a real input; "" if none shows it
    example_from: str = ""  # where that input came from in plain words, or why none shows the id
    composed: bool = False  # the input joins several machines' recordings: no run saw it whole
    node_action: str = ""  # what a node contract does by default (drain, report); "" if none
    by_input: tuple[ByInput, ...] = ()  # where the reading decides severity or remediation
    groups: tuple[str, ...] = ()  # a grouped `<concern>.differs`: the converge's ids it stands for


def example_label(found: Entry) -> str:
    """What an example is: a recording's report, or one composed from several recordings."""
    if found.composed:
        return "composed from several recordings: what gpurig drift prints on them"
    return "what gpurig drift printed"


class UnknownId(KeyError):
    """An id no run reports."""


def catalogue_ids() -> tuple[str, ...]:
    """Every id a run can report: the textfile writer's (plans and checks) and the fleet view's."""
    return tuple(sorted({*known_ids(), *fleet.IDS}))


def grouped(finding_id: str) -> tuple[str, ...]:
    """The converge's ids a grouped `<concern>.differs` finding may carry, sorted; () for an
    id that is not one (gpurig.plans.change names a subject's finding after its first change's
    concern)."""
    concern = finding_id.removesuffix(GROUPED)
    if not finding_id.endswith(GROUPED) or concern not in GROUPED_CONCERNS:
        return ()
    return tuple(sorted(i for i in CHANGE_IDS if i.split(".")[0] == concern))


def grouped_ids() -> tuple[str, ...]:
    """Every grouped id drift can report, sorted."""
    return tuple(sorted(f"{concern}{GROUPED}" for concern in GROUPED_CONCERNS))


def explained_ids() -> tuple[str, ...]:
    """Every id `gpurig explain` knows, sorted: the catalogue's and the grouped ones. Each has
    its line in `--list`, a page and a row in the docs' catalogue."""
    return tuple(sorted({*catalogue_ids(), *grouped_ids()}))


def examples() -> dict[str, Any]:
    """gpurig/data/finding_examples.yaml: each id's report from a real input, or why none."""
    return table("finding_examples.yaml")


def _example(finding_id: str) -> tuple[str, str, bool]:
    """(the report drift printed, where its input came from, composed), or ("", why no input
    shows it, False)."""
    shown = examples()["examples"].get(finding_id)
    if shown is not None:
        return shown["report"], shown["recorded"], bool(shown.get("composed"))
    return "", examples()["none"].get(finding_id, ""), False


def texts() -> dict[str, Any]:
    """gpurig/data/findings.yaml: the words per id, and the grouped finding's."""
    return table("findings.yaml")


def _remedy(key: str) -> str:
    return f"{key}: {rules()['remediations'][key]}"


def _facts(finding_id: str) -> tuple[str, str, str]:
    """(severity, remediation, source) from the tables that hold them."""
    row = rules()["checks"].get(finding_id)
    if row is not None:
        # The row's severity; where a reading changes it (a threshold, an Xid's bucket),
        # BY_INPUT's rows say how.
        return row["severity"], _remedy(row["remediation"]), row["source"]
    if finding_id in CHANGE_IDS:
        concern = finding_id.split(".")[0]
        remedy = f"{_remedy('reconverge')}; where the converge refuses, {_remedy('by-hand')}"
        return change_severity(finding_id), remedy, f"the converge's {concern} plan"
    raise UnknownId(finding_id)


def nearest(word: str) -> list[str]:
    """The ids a mistyped or shortened one most likely meant: those whose last part is the
    word (`shm_size`: container.shm_size), else the closest spellings."""
    import difflib

    ids = explained_ids()
    word = word.strip().lower()
    tails = [i for i in ids if i.rsplit(".", 1)[-1] == word or i.endswith(f".{word}")]
    return tails or difflib.get_close_matches(word, ids, n=3, cutoff=0.6)


def entry(finding_id: str) -> Entry:
    """The catalogue entry for `finding_id`; a `<concern>.differs` id gets the grouped text."""
    ids = grouped(finding_id)
    if ids:
        words = texts()["grouped"]
        return Entry(finding_id, words["summary"], _words(words), "error or warn",
                     _remedy("reconverge"), "the converge's plans",
                     node_action=_strongest_action(ids), groups=ids)  # fmt: skip
    words = texts()["findings"].get(finding_id)
    if words is None or finding_id not in catalogue_ids():
        raise UnknownId(finding_id)
    severity, remediation, source = _facts(finding_id)
    rows = tuple(BY_INPUT[finding_id]()) if finding_id in BY_INPUT else ()
    if rows:
        severity = " or ".join(dict.fromkeys(row.severity for row in rows))
        remedies = dict.fromkeys(row.remediation for row in rows)
        if len(remedies) > 1:
            remediation = f"by the input (below): {', '.join(remedies)}"
    return Entry(finding_id, words["summary"], _words(words), severity, remediation, source,
                 *_example(finding_id), _node_action(finding_id), rows)  # fmt: skip


def _node_action(finding_id: str) -> str:
    """The node contracts' default action for an id they report (gpurig.node.policy)."""
    return default_action(finding_id) or ""


def _strongest_action(ids: tuple[str, ...]) -> str:
    """A grouped finding's default action: the strongest of its ids', as a contract takes it."""
    governed = [i for i in ids if default_action(i)]
    return policy({}).of(governed) if governed else ""


NODE_ACTION = (
    "{action} by default: a node contract (Prolog, health check) {what}; a spec's "
    "node_contracts.actions sets drain, report or off per id or family"
)
NODE_ACTION_WHAT = {
    "drain": "drains the node on this error, within the drain budget",
    "report": "reports this error (stderr, syslog, textfile, exit status) and never drains",
}


def node_action_text(found: Entry) -> str:
    """The entry's default node action in words, or "" for an id no node contract governs."""
    if not found.node_action:
        return ""
    return NODE_ACTION.format(action=found.node_action, what=NODE_ACTION_WHAT[found.node_action])


def _words(words: Mapping[str, str]) -> dict[str, str]:
    return {key: words[key] for key in SECTIONS if words.get(key)}


def entries() -> list[Entry]:
    """Every id's entry, the grouped ones too, sorted by id."""
    return [entry(i) for i in explained_ids()]


def as_text(found: Entry, width: int = 88) -> str:
    """An entry for the terminal, like `ruff rule`: the id and summary, then each section."""
    lines = [f"{found.id}: {found.summary}", ""]
    for key, heading in SECTIONS.items():
        if key in found.words:
            lines += [heading, textwrap.fill(found.words[key], width, initial_indent="  ",
                                             subsequent_indent="  "), ""]  # fmt: skip
    if found.example:
        where = textwrap.fill(found.example_from, width, initial_indent="  ",
                              subsequent_indent="  ", break_long_words=False,
                              break_on_hyphens=False)  # fmt: skip
        lines += [f"Example ({example_label(found)})", textwrap.indent(found.example, "  "),
                  where, ""]  # fmt: skip
    elif found.example_from:
        why = f"none recorded: {found.example_from}"
        lines += ["Example", textwrap.fill(why, width, initial_indent="  ",
                                           subsequent_indent="  "), ""]  # fmt: skip
    facts = (("Severity", found.severity), ("Remediation", found.remediation),
             ("Node contracts", node_action_text(found)), ("Source", found.source))  # fmt: skip
    for label, value in [(label, value) for label, value in facts if value]:
        lines.append(textwrap.fill(f"{label}: {value}", width, subsequent_indent="  "))
    if found.groups:
        lines += ["", textwrap.fill(f"Its differences' ids: {', '.join(found.groups)}", width,
                                    subsequent_indent="  ", break_on_hyphens=False)]  # fmt: skip
    if found.by_input:
        lines += ["", "By input (severity, remediation: which readings give them)"]
        for row in found.by_input:
            lines.append(textwrap.fill(f"{row.severity}, {row.remediation}: {row.when}", width,
                                       initial_indent="  ", subsequent_indent="    "))  # fmt: skip
    return "\n".join(lines) + "\n"


def listing() -> str:
    """`gpurig explain --list`: every id, its severity and its one-line summary."""
    rows = [(e.id, e.severity, e.summary) for e in entries()]
    width, level = (max(len(row[column]) for row in rows) for column in (0, 1))
    return "".join(f"{i:<{width}}  {s:<{level}}  {summary}\n" for i, s, summary in rows)
