"""gpurig.spec.safe_yaml reads every document as ruamel's round-trip loader (gpurig's loader
before it, still pin's) reads it: the same YAML 1.2 values and the same line for every key and
list item, on libyaml's parser and on PyYAML's pure-Python one alike."""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from benchmarks.fleet_scale import fleet_inventory
from gpurig.spec import safe_yaml
from gpurig.spec.roundtrip_yaml import bounded_yaml, load
from gpurig.spec.safe_yaml import parse
from gpurig.spec.text_file import YamlRefused

ROOT = Path(__file__).resolve().parents[2]
PARSERS = {"libyaml": True, "pure Python": False}


def ruamel_plain(value: Any) -> Any:
    """ruamel's round-trip types as plain Python: what gpurig validated before."""
    if isinstance(value, Mapping):
        return {ruamel_key(k): ruamel_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [ruamel_plain(v) for v in value]
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value


def ruamel_key(key: Any) -> Any:
    plain = ruamel_plain(key)
    return tuple(plain) if isinstance(plain, list) else plain


def ruamel_lines(node: Any) -> Any:
    """The line of every key and item ruamel recorded, as safe_yaml's Lines."""
    lc = getattr(node, "lc", None)
    if isinstance(node, Mapping) and lc is not None:
        return {ruamel_key(k): (lc.data[k][0] + 1, ruamel_lines(node[k])) for k in lc.data or {}}
    if isinstance(node, list) and lc is not None:
        return [(lc.data[i][0] + 1, ruamel_lines(item)) for i, item in enumerate(node)]
    return None


def same_lines(ours: Any, theirs: Any) -> bool:
    """Every line ruamel has, ours has too (ours also has merged keys' lines)."""
    if theirs is None:
        return True
    if isinstance(theirs, dict):
        return isinstance(ours, dict) and all(
            key in ours and ours[key][0] == line and same_lines(ours[key][1], sub)
            for key, (line, sub) in theirs.items()
        )
    return len(ours) == len(theirs) and all(
        a[0] == b[0] and same_lines(a[1], b[1]) for a, b in zip(ours, theirs, strict=True)
    )


def same_values(a: Any, b: Any) -> bool:
    """Equal, with types (True is not 1) and NaN equal to itself."""
    if type(a) is not type(b) and not (
        isinstance(a, datetime.date) and isinstance(b, datetime.date)
    ):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_values(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_values(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and a != a:
        return b != b
    return a == b


# Plain scalars where YAML 1.1 and 1.2 differ, and ruamel's own spellings of 1.2's numbers.
SCALARS = [
    "0600", "0o600", "0x1F", "0b101", "1_000", "+12", "-0", "012_3", "0o", "0x", "00", "08",
    "0_9", "+0o7", "-0b11", "+0x1f", "0o17", "-0o17", "1:20", "190:20:30", "-1_", "_1",
    "9" * 32, "1e3", "1.5e3", ".5", "-.5e+3", "1.", "0.", "+.inf", "-.Inf", ".NaN", "1_0.5",
    "0.1_2", "1e+3", "1E3", "0600.5", "1e", "e3", "2024-01-02", "2024-1-2 3:04:05",
    "2024-01-02T03:04:05Z", "2024-01-02 03:04:05.5 +01:00", "no", "No", "NO", "n", "on", "On",
    "off", "yes", "y", "Y", "Off", "True", "TRUE", "true", "false", "False", "tRue", "~", "null",
    "Null", "NULL", "nULL", "", "10.100.0.1", "1.17.8-1", "v1", "512g", "-", "+", ".", "'0600'",
    '"no"', '!!int "5"', '!!float "1"', '!!float "-1_0"', '!!bool "true"', "!!null ''",
    "[0600, no, 1e3]", "{on: off}", "|\n  a\n  b\n", ">-\n  a\n  b\n",
    '"\\x41\\u00e9\\t"', "'it''s'", "a\n  b", "a #not a comment", "#comment",
]  # fmt: skip


def assert_read_alike(text: str, fast: bool) -> None:
    """safe_yaml reads `text` to ruamel's values and lines, or refuses it at ruamel's line."""
    try:
        theirs = load(text, bounded_yaml())
    except YamlRefused as refused:  # at the same line; a duplicate key: safe_yaml lists all
        if "duplicate key" in refused.message:
            assert parse(text, fast).duplicates[0][0] == refused.line
        else:
            with pytest.raises(YamlRefused) as ours:
                parse(text, fast)
            assert ours.value.line == refused.line and "YAML syntax error" in ours.value.message
        return
    ours = parse(text, fast)
    assert same_values(ours.data, ruamel_plain(theirs)), (ours.data, ruamel_plain(theirs))
    assert same_lines(ours.lines, ruamel_lines(theirs))


@pytest.mark.parametrize("fast", PARSERS.values(), ids=PARSERS.keys())
@pytest.mark.parametrize("text", SCALARS)
def test_a_scalar_reads_as_ruamel_reads_it(fast: bool, text: str) -> None:
    assert_read_alike(f"k: {text}\n", fast)


def _documents() -> list[tuple[str, str]]:
    examples = sorted((ROOT / "inventories" / "examples").glob("*.yaml"))
    corpus = sorted((ROOT / "tests" / "unit" / "bad_inventories").glob("*.yaml"))
    files = [(p.name, p.read_text(encoding="utf-8")) for p in examples + corpus]
    anchors = (
        "version: 1\n"
        "defaults: &d\n  ssh: &ssh {user: root, port: 2222}\n"
        "base: &base\n  a: 1\n  b: [x, y]\nother: &other {b: 2, c: 3}\n"
        "hosts:\n"
        "  one: {<<: *base, a: 5}\n"
        "  two:\n    <<: [*other, *base]\n    d: 4\n"
        "  three: {ssh: *ssh, list: [a, {b: 1}]}\n"
    )
    return [*files, ("fleet of 50", fleet_inventory(50)), ("anchors and merges", anchors)]


DOCUMENTS = _documents()


@pytest.mark.parametrize("fast", PARSERS.values(), ids=PARSERS.keys())
@pytest.mark.parametrize(("name", "text"), DOCUMENTS, ids=[d[0] for d in DOCUMENTS])
def test_a_document_reads_as_ruamel_reads_it_line_for_line(
    fast: bool, name: str, text: str
) -> None:
    assert_read_alike(text, fast)


def test_merged_keys_have_the_line_they_are_written_at() -> None:
    text = "a: &a\n  x: 1\n  y: 2\nb:\n  <<: *a\n  y: 3\n"
    parsed = parse(text)
    assert parsed.data["b"] == {"y": 3, "x": 1}
    assert parsed.lines["b"][1] == {"y": (6, None), "x": (2, None)}


def test_an_alias_in_a_list_has_the_line_it_is_written_at() -> None:
    """ruamel gave the anchor's line; the item's own is where to edit it."""
    text = "a: &a {x: 1}\nb:\n  - c\n  - *a\n"
    assert parse(text).lines["b"][1] == [(3, None), (4, {"x": (1, None)})]


@pytest.mark.parametrize(
    ("text", "value"),
    [("!!str 5", "5"), ("!!str true", "true"), ("!custom 5", "5"), ("=", "="), ("'<<'", "<<")],
)
def test_an_explicitly_tagged_or_odd_string_reads_as_the_string(text: str, value: str) -> None:
    """Where ruamel's round trip kept a tagged object (TaggedScalar) that no check of a string
    accepted, the string is read."""
    assert parse(f"k: {text}\n").data == {"k": value}


def test_every_duplicate_key_is_listed_with_its_path() -> None:
    text = "a:\n  x: 1\n  x: 2\nb: [{y: 1, y: 2}]\n<<: {}\n<<: {}\n"
    assert parse(text).duplicates == [(3, ("a", "x"), "x", 2), (4, ("b", 0, "y"), "y", 4)]


def test_a_yaml_1_1_document_is_refused_not_read_as_1_2() -> None:
    with pytest.raises(YamlRefused, match=r"%YAML 1\.1: gpurig reads YAML 1\.2"):
        parse("%YAML 1.1\n---\nk: no\n")
    assert parse("%YAML 1.2\n---\nk: no\n").data == {"k": "no"}


@pytest.mark.parametrize(
    "text", ["k: !!int abc\n", "k: !!float x\n", "k: !!bool yes\n", "k: -_\n", "k: !!int +_\n"]
)
def test_a_value_its_tag_does_not_fit_is_refused_at_its_line(text: str) -> None:
    """`-_` reads as an integer by its spelling and is none (ruamel raised IndexError)."""
    with pytest.raises(YamlRefused) as refused:
        parse("a: 1\n" + text)
    assert refused.value.line == 2 and "is not a valid" in refused.value.message


def test_libyaml_reads_a_fleet_many_times_faster_than_pure_python() -> None:
    """What the fast path is for: both parsers give the same document, libyaml far sooner."""
    assert safe_yaml.FAST_PARSER is not None, "this PyYAML has no libyaml"
    text = fleet_inventory(300)
    seconds = {}
    for name, fast in PARSERS.items():
        start = time.process_time()
        seconds[name] = (parse(text, fast), time.process_time() - start)
    (fast_doc, fast_s), (pure_doc, pure_s) = seconds.values()
    assert same_values(fast_doc.data, pure_doc.data) and fast_doc.lines == pure_doc.lines
    assert fast_s * 3 < pure_s, seconds
