"""The findings catalogue's examples (gpurig/data/finding_examples.yaml): what the code renders
today for their real inputs, one for every id or a stated reason, shown by `gpurig explain` and
the docs, escaped like every report. Regenerate with `python -m tests.finding_examples`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from docs import hooks
from docs.hooks import _example_lines, findings_reference
from gpurig.report import explain
from gpurig.spec.textsafe import visible
from tests.finding_examples import (
    DATA,
    STATES,
    blocks,
    dump,
    examples,
    ids,
    no_example,
    replay,
)

RECORDINGS = sorted(STATES.glob("*.json"))
STALE = "stale: run `python -m tests.finding_examples` and commit gpurig/data/finding_examples.yaml"


def stored() -> dict[str, Any]:
    return yaml.safe_load(DATA.read_text(encoding="utf-8"))


def test_the_stored_examples_are_what_the_code_renders_for_their_inputs() -> None:
    assert DATA.read_text(encoding="utf-8") == dump(examples()), STALE


def test_every_id_has_an_example_or_says_why_none_never_both() -> None:
    document = stored()
    shown, none = set(document["examples"]), set(document["none"])
    assert shown.isdisjoint(none)
    assert shown | none == set(explain.catalogue_ids())
    assert all(why.strip() for why in document["none"].values())
    assert {e["source"] for e in document["examples"].values()} <= {
        "sandbox", "recorded GPU fixture", "recorded fabric fixture"
    }  # fmt: skip


def test_every_stated_reason_names_a_catalogue_id() -> None:
    assert set(no_example()) <= set(explain.catalogue_ids())


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_a_recording_still_reports_what_its_drift_run_did(path: Path) -> None:
    """A recorded sandbox state replays through today's judge to the ids the live run printed
    (a rule that changed its verdict must be recorded again, not papered over)."""
    recorded = json.loads(path.read_text(encoding="utf-8"))
    assert ids(replay(recorded)) == recorded["ids"]


def test_every_recording_kept_is_an_examples_input() -> None:
    used = {e["from"].split(",")[0] for e in stored()["examples"].values()}
    assert {f"tests/fixtures/states/{p.name}" for p in RECORDINGS} <= used


def test_each_example_is_its_ids_block_as_drift_prints_it() -> None:
    for finding_id, found in stored()["examples"].items():
        head = found["report"].splitlines()[0]
        assert head.split()[1] in ("error", "warn"), finding_id
        # A subject's changes are one `CONCERN.differs`: its rows carry the fields.
        assert f"({finding_id})" in head or re.search(r"\(\w+\.differs\)$", head), head


def test_examples_are_escaped_like_every_report() -> None:
    for found in stored()["examples"].values():
        assert visible(found["report"], keep="\n") == found["report"]


def test_a_hostile_name_in_a_recording_is_escaped_in_its_block() -> None:
    recorded = json.loads(RECORDINGS[0].read_text(encoding="utf-8"))
    recorded["host"]["name"] = "evil\x1b]0;owned\x07\nfake  ok"
    (first, *_) = blocks(replay(recorded))
    assert "\x1b" not in first and "\x07" not in first
    assert first.startswith("evil\\x1b]0;owned\\x07\\nfake  ok")


def test_explain_prints_the_example_or_why_there_is_none() -> None:
    document = stored()
    for finding_id in explain.catalogue_ids():
        text = explain.as_text(explain.entry(finding_id))
        if finding_id in document["examples"]:
            shown = document["examples"][finding_id]
            # Outputs of two machines or more (" over " joins them) make a state composed from
            # several recordings: no drift run printed it.
            composed = " over " in shown["from"] and shown["source"] == "recorded GPU fixture"
            assert shown.get("composed", False) == composed, finding_id
            label = (
                "composed from several recordings: what gpurig drift prints on them"
                if composed
                else "what gpurig drift printed"
            )
            assert f"Example ({label})\n" in text, finding_id
            assert " ".join(shown["recorded"].split()) in " ".join(text.split())
            assert "\n".join("  " + line for line in shown["report"].splitlines()) in text
        else:
            assert "none recorded: " in text, finding_id


def test_each_findings_page_shows_its_example_in_a_code_block() -> None:
    pages, catalogue = hooks.pages(), findings_reference()
    for finding_id, shown in stored()["examples"].items():
        page = pages[f"findings/{finding_id}.md"]
        assert f"```text\n{shown['report']}\n```" in page, finding_id
    for finding_id in stored()["none"]:
        assert f"\n# {finding_id}\n" in pages[f"findings/{finding_id}.md"]
        assert f"(../findings/{finding_id}.md)" in catalogue


def test_a_backtick_fence_in_an_example_cannot_end_its_code_block() -> None:
    entry = explain.entry("disk.free")
    hostile = explain.Entry(**{**vars(entry), "example": "host  error  ```\n<script>x</script>"})
    lines = _example_lines(hostile)
    assert lines[2] == "````text" and lines[4] == "````"


# A test suite's own names: a path under tests/, a pytest node id, a test module, a test table.
_TEST_NAMES = re.compile(r"tests/|::|\btest_\w*\.py|FIRES_ON_RECORDING|NO_RECORDING|CASES\[")


def test_no_user_facing_text_names_the_test_suites_files() -> None:
    """What a user reads (`gpurig explain`, each findings page, the catalogue) says where an
    example came from in plain words; the recording's path is kept in the data file."""
    pages = hooks.pages()
    texts = {"catalogue": findings_reference()}
    for finding_id in explain.catalogue_ids():
        texts[f"gpurig explain {finding_id}"] = explain.as_text(explain.entry(finding_id))
        texts[f"findings/{finding_id}.md"] = pages[f"findings/{finding_id}.md"]
    shown = {where: _TEST_NAMES.findall(text) for where, text in texts.items()}
    assert {where: found for where, found in shown.items() if found} == {}
