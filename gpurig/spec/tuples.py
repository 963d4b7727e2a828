"""Records as named tuples, and their plain-dict form for facts and JSON.

The node contracts run at every job start, so what their modules define at import counts: a
frozen dataclass costs about a millisecond to create (its methods are generated and compiled),
a named tuple a tenth of that. `asdict` keeps `dataclasses.asdict`'s shape for facts: nested
records become dicts, lists stay lists and tuples tuples.
"""

from __future__ import annotations

from typing import Any


def asdict(record: Any) -> dict[str, Any]:
    """A named tuple as a dict, records inside it as dicts too."""
    return {name: _plain(value) for name, value in zip(record._fields, record)}


def _plain(value: Any) -> Any:
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return asdict(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
