"""Whether a document passes the inventory schema, answered without jsonschema: the node
contracts load a spec at every job start, and jsonschema cost them more than their whole read
(benchmarks/node_contracts.py). It knows the keywords the schema uses, with the schema's YAML
types (an integer is never `true` or `22.0`, a number never `.nan`), and answers only yes or
no: on no, the loader asks jsonschema for the problems and their lines, so every message is
still jsonschema's. A keyword it does not know makes it say no, so a schema that grows a
keyword stays checked.
tests/unit/test_schema_check.py holds its verdicts equal to jsonschema's over the corpus."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import cache
from typing import Any

# Words a schema may hold that say nothing about validity.
_ANNOTATIONS = frozenset(
    {"$schema", "$id", "$comment", "$defs", "title", "description", "examples", "default",
     "x-expected", "x-fix", "x-no-default"}
)  # fmt: skip
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and math.isfinite(v))
    ),
}


class _Unknown(Exception):
    """The schema holds a keyword this checker does not know."""


@cache
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(text)


def _canonical(value: Any) -> Any:
    """A value as JSON compares it: 1 and True differ, 1 and 1.0 do not, key order does not."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    if isinstance(value, dict):
        return ("object", tuple(sorted((k, _canonical(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("array", tuple(_canonical(v) for v in value))
    return ("string", value)


def _equal(a: Any, b: Any) -> bool:
    return _canonical(a) == _canonical(b)


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    if not ref.startswith("#/"):
        raise _Unknown(ref)
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _valid(root: Mapping[str, Any], schema: Any, value: Any) -> bool:
    if schema is True or schema == {}:
        return True
    if schema is False:
        return False
    return all(_keyword(root, schema, key, value) for key in schema if key not in _ANNOTATIONS)


def _keyword(root: Mapping[str, Any], schema: Mapping[str, Any], key: str, value: Any) -> bool:
    arg = schema[key]
    if key == "$ref":
        return _valid(root, _resolve(root, arg), value)
    if key == "type":
        return any(_TYPES[t](value) for t in ([arg] if isinstance(arg, str) else arg))
    if key == "enum":
        return any(_equal(value, option) for option in arg)
    if key == "const":
        return _equal(value, arg)
    if key in ("anyOf", "not", "if"):
        if key == "anyOf":
            return any(_valid(root, sub, value) for sub in arg)
        if key == "not":
            return not _valid(root, arg, value)
        branch = schema.get("then" if _valid(root, arg, value) else "else", True)
        return _valid(root, branch, value)
    if key in ("then", "else"):
        return True  # judged with `if`
    if isinstance(value, str):
        return _string(key, arg, value)
    if isinstance(value, dict):
        return _object(root, schema, key, arg, value)
    if isinstance(value, list):
        return _array(root, key, arg, value)
    if key in ("minimum", "maximum") and _TYPES["number"](value):
        return value >= arg if key == "minimum" else value <= arg
    if key in _STRING | _OBJECT | _ARRAY | {"minimum", "maximum"}:
        return True  # applies to another type
    raise _Unknown(key)


_STRING = frozenset({"pattern", "minLength", "maxLength"})
_OBJECT = frozenset({"properties", "additionalProperties", "required", "propertyNames",
                     "patternProperties"})  # fmt: skip
_ARRAY = frozenset({"items", "minItems", "maxItems", "uniqueItems"})


def _string(key: str, arg: Any, value: str) -> bool:
    if key == "pattern":
        return _pattern(arg).search(value) is not None
    if key == "minLength":
        return len(value) >= arg
    if key == "maxLength":
        return len(value) <= arg
    if key in _OBJECT | _ARRAY | {"minimum", "maximum"}:
        return True
    raise _Unknown(key)


def _object(
    root: Mapping[str, Any], schema: Mapping[str, Any], key: str, arg: Any, value: dict
) -> bool:
    if key == "properties":
        return all(_valid(root, arg[k], v) for k, v in value.items() if k in arg)
    if key == "patternProperties":
        return all(
            _valid(root, sub, v)
            for pattern, sub in arg.items()
            for k, v in value.items()
            if _pattern(pattern).search(k)
        )
    if key == "additionalProperties":
        known = schema.get("properties", {})
        patterns = [_pattern(p) for p in schema.get("patternProperties", {})]
        extra = [v for k, v in value.items()
                 if k not in known and not any(p.search(k) for p in patterns)]  # fmt: skip
        return all(_valid(root, arg, v) for v in extra)
    if key == "required":
        return all(k in value for k in arg)
    if key == "propertyNames":
        return all(_valid(root, arg, k) for k in value)
    if key in _STRING | _ARRAY | {"minimum", "maximum"}:
        return True
    raise _Unknown(key)


def _array(root: Mapping[str, Any], key: str, arg: Any, value: list) -> bool:
    if key == "items":
        return all(_valid(root, arg, item) for item in value)
    if key == "minItems":
        return len(value) >= arg
    if key == "maxItems":
        return len(value) <= arg
    if key == "uniqueItems":
        seen = [_canonical(item) for item in value]
        return not arg or len(seen) == len(set(seen))
    if key in _STRING | _OBJECT | {"minimum", "maximum"}:
        return True
    raise _Unknown(key)


def passes(root: Mapping[str, Any], value: Any, ref: str | None = None) -> bool:
    """Whether `value` passes `root` (or the definition `ref` within it, e.g. `#/$defs/spec`);
    False also where the schema holds a keyword this checker does not know."""
    try:
        return _valid(root, _resolve(root, ref) if ref else root, value)
    except (_Unknown, RecursionError, TypeError, KeyError):
        return False
