"""Regular expressions compiled on first use.

A node contract imports every parser it might need and uses few of them on a given node;
compiling each module's patterns at import cost about 9 ms of every job start. `lazy` stands
where `re.compile` stood and compiles when a method or attribute is first asked for.
"""

from __future__ import annotations

import re
from typing import Any, cast


class _Lazy:
    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = re.compile(*self._args)
        return getattr(self._compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self._args[0]!r}, {self._args[1]})"


def digits(text: str, most: int) -> bool:
    """Whether `[0-9]{1,most}` matches the whole of `text`, with no pattern compiled: a
    number a node contract checks at every start."""
    return 0 < len(text) <= most and text.isascii() and text.isdigit()


def lazy(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """`re.compile(pattern, flags)`, done when the pattern is first used."""
    return cast("re.Pattern[str]", _Lazy(pattern, flags))
