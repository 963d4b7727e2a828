"""Parse YAML that may be hostile, as YAML 1.2's core schema reads it, with the line of every
value: bounded in values written, what aliases add, depth and integer size (its bytes and
characters are gpurig.spec.text_file's).

An inventory is shallow, and what it writes out is bounded by the file's size, so anything far
beyond that is refused before it can hang or exhaust memory: a FIFO or /dev/zero named as the
file, an alias bomb (a few hundred bytes that expand to billions of nodes), nesting that
overflows the stack, an integer longer than Python will convert. Each of these is refused in
milliseconds, naming the line; only a big plain file costs what parsing it up to a bound costs.

Events come from PyYAML's parser, libyaml's C one where PyYAML was built with it (a 5,000-host
fleet is parsed in under a second, where ruamel's pure-Python parser took half a minute), else
PyYAML's pure-Python one; both hand over one event at a time, so the bounds here stop a hostile
file early on either. The document is built here from those events, never by
PyYAML's constructors: plain scalars are resolved by YAML 1.2 (`no`, `on` and `yes` are
strings, `0600` is the integer 600, `0o600` is octal), as ruamel's round-trip loader, which
gpurig used before, resolves them (tests/unit/test_safe_yaml.py holds the two equal).
"""

from __future__ import annotations

import gc
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
import yaml.parser
import yaml.reader
import yaml.scanner
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import ScalarNode

from gpurig.spec.text_file import YamlRefused, check_text

# What a document writes out is bounded by count: past what a fleet writes (10,000 hosts of 36
# values each, address, SSH port and key and a four-key spec, are 360,000), and far below the 4
# million one-character values the file's size would allow.
MAX_WRITTEN = 500_000
# What aliases add, by what is written: each written value may stand for ALIAS_FACTOR more (a
# host entry of about ten values naming a shared spec of a hundred), and any document for
# ALIAS_FLOOR more (a small file sharing one big block). After parsing, every expanded value is
# walked again (plain types, the schema, the merge), so what aliases add costs about what
# writing it out would; an alias bomb, a few hundred bytes standing for billions, is far past
# both.
ALIAS_FACTOR = 10
ALIAS_FLOOR = 20_000
MAX_DEPTH = 32  # the deepest inventory key (hosts.H.spec.repos.P.python.keep[0]) is 8
MAX_INT_CHARS = 32  # a 64-bit limit has 20 characters; Python refuses to convert 4300 digits

try:  # libyaml's parser, where PyYAML was built with it (its wheels are)
    from yaml._yaml import CParser as FAST_PARSER
except ImportError:  # pragma: no cover - a PyYAML built without libyaml
    FAST_PARSER = None


class PureParser(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    """PyYAML's pure-Python parser: the same events as libyaml's, where it is missing."""

    def __init__(self, text: str) -> None:
        yaml.reader.Reader.__init__(self, text)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        """Refuses flow nesting (`[[[...`) past MAX_DEPTH as it reads it: each open bracket
        may start a key, and the look-ahead over them (1,024 characters) is quadratic here
        (0.4 s before the first event; libyaml's, in C, takes milliseconds)."""
        if self.flow_level >= MAX_DEPTH:
            raise YamlRefused(self.line + 1, f"nested deeper than {MAX_DEPTH} levels")
        super().fetch_flow_collection_start(TokenClass)


class Bounds:
    """The counts of one document as it is composed: values written, values once every alias
    is expanded, and the refusals where either, or the depth, goes past its bound."""

    def __init__(self) -> None:
        self.written = 0  # values the text spells out so far
        self.expanded = 0  # values so far, each alias counted as all it stands for

    def value(self, line: int, depth: int) -> None:
        """One value written out at `depth` (the document is depth 1)."""
        self.written += 1
        if self.written > MAX_WRITTEN:
            raise YamlRefused(line, f"more than {MAX_WRITTEN} values written")
        self.expanded += 1
        if depth > MAX_DEPTH:
            raise YamlRefused(line, f"nested deeper than {MAX_DEPTH} levels")

    def alias(self, line: int, depth: int, values: int, height: int) -> None:
        """An alias at `depth` to a node of `values` values and `height` levels: refused
        once the aliases so far add more than the values written so far allow."""
        self.expanded += values
        if depth + height - 1 > MAX_DEPTH:
            raise YamlRefused(line, f"nested deeper than {MAX_DEPTH} levels")
        bound = self.written + max(ALIAS_FLOOR, ALIAS_FACTOR * self.written)
        if self.expanded > bound:
            raise YamlRefused(
                line, f"aliases expand the {self.written} values written to more than {bound}"
            )


def syntax_refusal(exc: Exception) -> YamlRefused:
    """A parser's error (PyYAML's or ruamel's, which share their shape) as a refusal at its
    line: what it found, and what it was reading."""
    problem, context = getattr(exc, "problem", None), getattr(exc, "context", None)
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if not (problem or context):
        return YamlRefused(mark.line + 1 if mark else None, f"YAML error: {exc}")
    message = f"YAML syntax error: {problem or context}"
    context_mark = getattr(exc, "context_mark", None)
    if problem and context and context_mark:
        message += f" ({context} at line {context_mark.line + 1})"
    return YamlRefused(mark.line + 1 if mark else None, message)


# Lines of a document beside its data: a mapping's are {key: (line of the key, lines of its
# value)}, a list's [(line of the item, lines of the item)], a scalar's None.
Lines = Any


@dataclass
class Parsed:
    """One document: its data in plain Python types (dict, list, str, int, float, bool, None,
    and datetime for a timestamp), each alias expanded into a copy of what it names; the lines
    of its keys and items; every duplicate key as (line, key path, key, line of the first)."""

    data: Any
    lines: Lines
    duplicates: list[tuple[int, tuple[Any, ...], Any, int]] = field(default_factory=list)
    bounds: Bounds = field(default_factory=Bounds)


def parse(text: str, fast: bool = True) -> Parsed:
    """The one document in `text`, every failure a YamlRefused; `fast=False` (or a PyYAML
    without libyaml) reads it with PyYAML's pure-Python parser, to the same result."""
    check_text(text)
    parser = FAST_PARSER(text) if fast and FAST_PARSER is not None else PureParser(text)
    composer = _Composer(parser)
    collecting = gc.isenabled()
    gc.disable()  # a parse makes only trees, no cycles: a sixth of its time went to scans
    try:
        return composer.document()
    except yaml.YAMLError as exc:
        raise syntax_refusal(exc) from None
    finally:
        parser.dispose()
        if collecting:
            gc.enable()


_INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP, _MERGE = (
    f"tag:yaml.org,2002:{kind}" for kind in ("int", "float", "bool", "null", "timestamp", "merge")
)
# YAML 1.2's plain scalars as ruamel's resolver reads them (ruamel.yaml.resolver, version 1.2):
# the core schema's, with `_` allowed between digits and `0b` binary, as ruamel allows.
_FLOAT_RE = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_INT_RE = re.compile(
    r"^(?:[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+]?[0-9_]+|[-+]?0x[0-9a-fA-F_]+)$", re.X
)
_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL_RE = re.compile(r"^(?:~|null|Null|NULL|)$")
_TIMESTAMP_RE = re.compile(
    r"""^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
    |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
    (?:[Tt]|[ \t]+)[0-9][0-9]?
    :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
    (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$""",
    re.X,
)
_NUMERIC_START = frozenset("-+0123456789.")


def resolve(value: str) -> str | None:
    """The tag YAML 1.2 gives a plain scalar, None for a string (the first match wins, in the
    order of ruamel's resolvers: float before int, a timestamp last)."""
    first = value[:1]
    if not value:
        return _NULL
    if first in _NUMERIC_START:
        if _FLOAT_RE.match(value):
            return _FLOAT
        if _INT_RE.match(value):
            return _INT
        if _TIMESTAMP_RE.match(value):
            return _TIMESTAMP
    elif first in "tTfF":
        return _BOOL if _BOOL_RE.match(value) else None
    elif first in "~nN":
        return _NULL if _NULL_RE.match(value) else None
    elif value == "<<":
        return _MERGE
    return None


def _to_int(value: str) -> int:
    digits = value.replace("_", "")
    sign = -1 if digits[:1] == "-" else 1
    digits = digits.lstrip("-+")
    for prefix, base in (("0b", 2), ("0x", 16), ("0o", 8)):
        if digits.startswith(prefix):
            return sign * int(digits[2:], base)
    return sign * int(digits)  # YAML 1.2: a leading zero is still decimal


def _to_float(value: str) -> float:
    text = value.replace("_", "").lower()
    if text.endswith((".inf", ".nan")):
        return float(text.replace(".", ""))
    return float(text)


def _to_timestamp(value: str) -> Any:
    return SafeConstructor().construct_yaml_timestamp(ScalarNode(_TIMESTAMP, value))


# What an explicit tag accepts: `!!float 1` is 1.0, as ruamel reads it.
_MATCHES = {_INT: _INT_RE, _FLOAT: re.compile(rf"{_FLOAT_RE.pattern}|^[-+]?[0-9][0-9_]*$", re.X),
            _BOOL: _BOOL_RE, _NULL: _NULL_RE, _TIMESTAMP: _TIMESTAMP_RE}  # fmt: skip
_BUILD = {_INT: _to_int, _FLOAT: _to_float, _BOOL: lambda v: v.lower() == "true",
          _NULL: lambda v: None, _TIMESTAMP: _to_timestamp}  # fmt: skip


def scalar(value: str, tag: str | None, line: int) -> Any:
    """A scalar's value under `tag` (None: resolved as plain); a tag the core schema does not
    know reads as a string. Refuses an integer too long to convert and a value its explicit
    tag does not fit (`!!int abc`)."""
    if tag not in _BUILD:
        return value
    if tag == _INT and len(value) > MAX_INT_CHARS:
        raise YamlRefused(line, f"an integer of {len(value)} characters is too long")
    try:
        if _MATCHES[tag].match(value):
            return _BUILD[tag](value)
    except ValueError:  # `!!int -_`, a timestamp of month 13
        pass
    raise YamlRefused(line, f"{value!r} is not a valid {tag.rpartition(':')[2]}")


def _copy(value: Any) -> Any:
    """A fresh copy of an anchored value for each alias, so the document stays a tree."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _key(value: Any) -> Any:
    """A key as a dict can hold it: a list as a tuple (`? [a, b]`), and what cannot be hashed
    (`? {a: 1}`) as its text, so that it can still be refused as a key."""
    value = tuple(value) if isinstance(value, list) else value
    try:
        hash(value)
    except TypeError:
        return str(value)
    return value


# A node's key path as (parent's path, key or index), None at the top: one small tuple a node,
# made into the path itself only for a duplicate key's message.
Path = Any


def _steps(path: Path) -> list[Any]:
    steps = []
    while path is not None:
        path, step = path
        steps.append(step)
    return steps[::-1]


class _Composer:
    """The document, built from the parser's events one at a time, under Bounds."""

    def __init__(self, parser: Any) -> None:
        self.parser = parser
        self.parsed = Parsed(None, None)
        self.bounds = self.parsed.bounds
        # anchor -> (value, lines, values, height); None while the anchored node is open
        self.anchors: dict[str, tuple[Any, Lines, int, int] | None] = {}

    def document(self) -> Parsed:
        parser = self.parser
        parser.get_event()  # the stream's start
        start = parser.get_event()
        if isinstance(start, StreamEndEvent):
            return self.parsed  # no document: null
        if start.version not in (None, (1, 2)):
            major, minor = start.version
            raise YamlRefused(
                start.start_mark.line + 1,
                f"%YAML {major}.{minor}: gpurig reads YAML 1.2 (drop the directive)",
            )
        value, lines, _, _ = self.node(parser.get_event(), 1, None)
        self.parsed.data, self.parsed.lines = value, lines
        parser.get_event()  # the document's end
        after = parser.get_event()
        if isinstance(after, DocumentStartEvent):
            raise YamlRefused(
                after.start_mark.line + 1,
                "YAML syntax error: expected a single document in the stream, "
                "but found another document",
            )
        return self.parsed

    def node(self, event: Any, depth: int, path: Path) -> tuple[Any, Lines, int, int]:
        """(value, lines, values it stands for, height) of the node `event` starts."""
        line = event.start_mark.line + 1
        kind = type(event)
        if kind is AliasEvent:
            if event.anchor not in self.anchors:
                raise YamlRefused(line, f"YAML syntax error: found undefined alias *{event.anchor}")
            known = self.anchors[event.anchor]
            if known is None:
                raise YamlRefused(line, f"alias *{event.anchor} refers to a node containing it")
            value, lines, values, height = known
            self.bounds.alias(line, depth, values, height)
            return _copy(value), lines, values, height
        bounds = self.bounds
        bounds.value(line, depth)
        before = bounds.expanded - 1
        anchor = event.anchor
        if anchor is not None:
            self.anchors[anchor] = None
        if kind is ScalarEvent:
            tag = resolve(event.value) if event.implicit[0] else event.tag
            result = (scalar(event.value, tag, line), None, 1, 1)
        elif kind is SequenceStartEvent:
            result = self.sequence(depth, path, before)
        else:
            result = self.mapping(depth, path, before)
        if anchor is not None:
            self.anchors[anchor] = result
        return result

    def sequence(self, depth: int, path: Path, before: int) -> tuple[Any, ...]:
        items, lines, height = [], [], 0
        get = self.parser.get_event
        while type(event := get()) is not SequenceEndEvent:
            value, sub, _, below = self.node(event, depth + 1, (path, len(items)))
            items.append(value)
            lines.append((event.start_mark.line + 1, sub))
            if below > height:
                height = below
        return items, lines, self.bounds.expanded - before, height + 1

    def mapping(self, depth: int, path: Path, before: int) -> tuple[Any, ...]:
        mapping: dict[Any, Any] = {}
        lines: dict[Any, Any] = {}
        merged: list[tuple[dict[Any, Any], dict[Any, Any], int]] = []
        height = 0
        get = self.parser.get_event
        while type(event := get()) is not MappingEndEvent:
            line = event.start_mark.line + 1
            is_merge = type(event) is ScalarEvent and (
                event.tag == _MERGE or (event.implicit[0] and event.value == "<<")
            )
            key, _, _, below = self.node(event, depth + 1, path)
            if type(key) is not str:
                key = _key(key)
            value_event = get()
            value, sub, _, deeper = self.node(value_event, depth + 1, (path, key))
            height = max(height, below, deeper)
            if is_merge:
                merged += self.merge_sources(value, sub, value_event.start_mark.line + 1)
                continue
            if key in lines:
                first = lines[key][0]
                self.parsed.duplicates.append((line, (*_steps(path), key), key, first))
                continue
            mapping[key], lines[key] = value, (line, sub)
        for source, source_lines, _ in merged:  # earlier sources win; explicit keys over all
            for key, value in source.items():
                if key not in mapping:
                    mapping[key] = value
                    lines[key] = source_lines[key]
        return mapping, lines, self.bounds.expanded - before, height + 1

    @staticmethod
    def merge_sources(value: Any, lines: Lines, line: int) -> list[tuple[Any, Any, int]]:
        """What a merge key (`<<: *base` or `<<: [*a, *b]`) merges, in order."""
        if isinstance(value, dict):
            return [(value, lines, line)]
        if isinstance(value, list) and all(isinstance(item, dict) for item in value):
            return [(item, sub, at) for item, (at, sub) in zip(value, lines)]
        raise YamlRefused(line, "expected a mapping or a list of mappings to merge (<<)")
