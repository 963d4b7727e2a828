"""Every bad inventory in the corpus is refused with exactly the message its first line states.

The second line says which layer refuses it: `schema` (plain jsonschema refuses it too),
`loader` (only gpurig's extra checks can: plain jsonschema accepts it) or `yaml` (the parser).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from ruamel.yaml import YAML

from gpurig.spec.inventory import InventoryError, load_inventory

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((Path(__file__).parent / "bad_inventories").glob("*.yaml"))
EXAMPLES = sorted((ROOT / "inventories" / "examples").glob("*.yaml"))


def _header(path: Path) -> tuple[str, str, str]:
    """(expected `LINE: key.path:` prefix, message fragment, layer) from the first two lines."""
    first, second = path.read_text(encoding="utf-8").splitlines()[:2]
    expect = re.fullmatch(r"# expect: (\d+:.*?) \| (.+)", first)
    layer = re.fullmatch(r"# layer: (schema|loader|yaml)", second)
    assert expect and layer, f"{path.name}: malformed header"
    return expect[1], expect[2], layer[1]


def _raw_validator() -> Draft202012Validator:
    schema = json.loads((ROOT / "schemas" / "inventory.schema.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _layer(layer: str) -> list[Path]:
    return [p for p in CORPUS if _header(p)[2] == layer]


def test_corpus_covers_every_layer() -> None:
    assert len(_layer("schema")) >= 20
    assert len(_layer("loader")) >= 5
    assert len(_layer("yaml")) >= 3


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_bad_inventory_is_refused_with_its_message(path: Path) -> None:
    prefix, fragment, _ = _header(path)
    with pytest.raises(InventoryError) as info:
        load_inventory([path])
    problems = [str(p) for p in info.value.problems]
    assert len(problems) == 1, problems
    assert str(info.value) == problems[0]
    assert problems[0].startswith(f"{path}:{prefix}"), problems[0]
    assert fragment in problems[0]


@pytest.mark.parametrize("path", _layer("schema"), ids=lambda p: p.stem)
def test_schema_level_refusal_is_refused_by_plain_jsonschema(path: Path) -> None:
    data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    assert list(_raw_validator().iter_errors(data))


@pytest.mark.parametrize("path", _layer("loader"), ids=lambda p: p.stem)
def test_loader_level_refusal_passes_plain_jsonschema(path: Path) -> None:
    """These need gpurig's own checks; if the schema caught them, they belong to `schema`."""
    data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    assert list(_raw_validator().iter_errors(data)) == []


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_is_valid_for_loader_and_plain_jsonschema(path: Path) -> None:
    data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    assert list(_raw_validator().iter_errors(data)) == []
    assert len(load_inventory([path]).hosts) == len(data["hosts"])  # profiles.yaml has none


def test_examples_exist() -> None:
    assert [p.name for p in EXAMPLES] == ["cluster.yaml", "example.yaml", "profiles.yaml"]
