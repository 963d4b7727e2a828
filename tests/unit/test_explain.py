"""The findings catalogue (`gpurig explain`): every id a run reports has its text, no text names
an id no run reports, and the facts beside the words are the tables' own."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from gpurig.checks.rules import rules
from gpurig.cli.main import main
from gpurig.plans import CHANGE_IDS
from gpurig.report import explain, fleet
from gpurig.report.textfile import families
from gpurig.spec.finding import HostReport


def written_ids() -> set[str]:
    """The ids the textfile writer puts in a checked host's file, for both severities."""
    [per_id, *_] = families([HostReport("a", True)], 0.0, 0.0, host_label=False)
    severities = {(labels["id"], labels["severity"]) for labels, _ in per_id.samples}
    ids = {i for i, _ in severities}
    assert severities == {(i, s) for i in ids for s in ("error", "warn")}
    return ids


def test_every_id_the_textfile_writer_knows_has_an_entry() -> None:
    texts = explain.texts()["findings"]
    missing = sorted(written_ids() - set(texts))
    assert not missing, f"findings.yaml: no text for {missing}"


def test_every_entry_names_an_id_a_run_reports() -> None:
    reported = written_ids() | set(fleet.IDS)
    unknown = sorted(set(explain.texts()["findings"]) - reported)
    assert not unknown, f"findings.yaml: no run reports {unknown}"
    assert set(explain.catalogue_ids()) == reported


def test_each_entry_has_its_words_and_the_tables_facts() -> None:
    for found in explain.entries():
        if found.groups:  # a grouped id: the words are the grouped finding's
            assert found.severity == "error or warn" and found.id in explain.grouped_ids()
            continue
        assert found.summary and "\n" not in found.summary, found.id
        assert {"means", "matters", "fix"} <= set(found.words), found.id
        row = rules()["checks"].get(found.id)
        if found.by_input:  # the reading decides: the rows say how (test_severity_by_input.py)
            assert found.severity == " or ".join(dict.fromkeys(r.severity for r in found.by_input))
            assert row is not None and row["source"] == found.source
        elif row is not None:
            assert found.severity == row["severity"] and row["source"] == found.source
            assert found.remediation.startswith(row["remediation"] + ": ")
        else:
            assert found.id in CHANGE_IDS
    assert explain.entry("cleanup.core_files").severity == "warn"
    assert explain.entry("repo.dirty").severity == "error"


@pytest.mark.parametrize("concern", sorted({i.split(".")[0] for i in CHANGE_IDS}))
def test_a_grouped_finding_is_explained_where_its_concern_can_group(concern: str) -> None:
    grouped = f"{concern}.differs"
    if concern not in explain.GROUPED_CONCERNS:  # no subject of its takes two of its ids
        with pytest.raises(explain.UnknownId):
            explain.entry(grouped)
        return
    found = explain.entry(grouped)
    assert found.summary == explain.texts()["grouped"]["summary"]
    assert found.groups and {i.split(".")[0] for i in found.groups} == {concern}


def test_every_grouped_id_a_recorded_report_shows_is_explained() -> None:
    shown = {m for e in explain.examples()["examples"].values()
             for m in re.findall(r"\((\w+\.differs)\)", e["report"])}  # fmt: skip
    assert shown and shown <= set(explain.grouped_ids())


def test_the_cli_prints_an_entry_lists_every_id_and_refuses_an_unknown_one() -> None:
    runner = CliRunner()
    shown = runner.invoke(main, ["explain", "gpu.row_remap_pending"])
    assert shown.exit_code == 0
    assert shown.output.startswith("gpu.row_remap_pending: ")
    for heading in ("What it means", "Why it matters", "What to do", "Severity: error"):
        assert heading in shown.output
    listed = runner.invoke(main, ["explain", "--list"])
    assert [line.split()[0] for line in listed.output.splitlines()] == list(explain.explained_ids())
    unknown = runner.invoke(main, ["explain", "gpu.nope"])
    assert unknown.exit_code == 2 and "gpurig explain --list" in unknown.output
    assert runner.invoke(main, ["explain"]).exit_code == 2
    with pytest.raises(explain.UnknownId):
        explain.entry("nothing.differs")


@pytest.mark.parametrize(
    ("given", "suggested"),
    [
        ("shm_size", "container.shm_size"),
        ("xid", "gpu.xid"),
        ("container.shm_sze", "container.shm_size"),
    ],
)
def test_an_unknown_id_suggests_the_one_meant(given: str, suggested: str) -> None:
    unknown = CliRunner().invoke(main, ["explain", given])
    assert unknown.exit_code == 2 and f"did you mean {suggested}" in unknown.output
