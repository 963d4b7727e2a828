"""gpurig.spec.schema_check says yes exactly where jsonschema (with the schema's YAML types)
finds no problem: over the example and bad inventories, every hostile value the fault suite
plants, each host's spec alone, and the type edge cases YAML brings. A wrong "yes" would let an
invalid inventory through unexplained, so the corpus is the whole of what the tests know."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpurig.spec.inventory import _spec_validator, _validator, schema
from gpurig.spec.schema_check import passes
from tests.unit.test_faults_input import BASE, CASES, _replace

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted([*(ROOT / "inventories").rglob("*.yaml"),
                *(ROOT / "tests" / "unit" / "bad_inventories").glob("*.yaml")])  # fmt: skip


def documents() -> list[tuple[str, Any]]:
    found = []
    for path in FILES:
        try:
            found.append((path.name, yaml.safe_load(path.read_text(encoding="utf-8"))))
        except yaml.YAMLError:
            continue  # a syntax error never reaches the schema
    found += [(f"{name}:{value!r}", _replace(path, value)[0]) for name, path, value, _ in CASES]
    port = copy.deepcopy(BASE)
    for value in (True, 22.0, 22.5, float("nan"), float("inf"), None, "22", [22], {"a": 1}):
        port["hosts"]["a"]["ssh"]["port"] = value
        found.append((f"port {value!r}", copy.deepcopy(port)))
    return found


DOCUMENTS = documents()


@pytest.mark.parametrize(("name", "doc"), DOCUMENTS, ids=[d[0] for d in DOCUMENTS])
def test_the_verdict_is_jsonschemas(name: str, doc: Any) -> None:
    assert passes(schema(), doc) == (not list(_validator().iter_errors(doc)))
    hosts = doc.get("hosts") if isinstance(doc, dict) else None
    for host in (hosts or {}).values() if isinstance(hosts, dict) else ():
        if isinstance(host, dict) and "spec" in host:
            spec = host["spec"]
            expected = not list(_spec_validator().iter_errors(spec))
            assert passes(schema(), spec, "#/$defs/spec") == expected


def test_the_corpus_holds_both_verdicts() -> None:
    verdicts = {passes(schema(), doc) for _, doc in DOCUMENTS}
    assert verdicts == {True, False} and len(DOCUMENTS) > 150


def test_a_keyword_it_does_not_know_is_a_no() -> None:
    assert passes({"type": "string"}, "x")
    assert not passes({"type": "string", "format": "email"}, "x")
    assert not passes({"$ref": "https://example.org/schema"}, "x")
