"""Counts in words, as every report says them: a count and its noun, the noun singular for one
("1 host, 1 with drift", "2 hosts, 1 with drift")."""

from __future__ import annotations


def counted(count: float, noun: str, plural: str | None = None) -> str:
    """`count noun`: the noun as given (singular) where the count is 1, else its plural (the
    noun with an s, or `plural` where that is not how it is spelt)."""
    number = f"{count:g}" if isinstance(count, float) else str(count)
    return f"{number} {noun if count == 1 else plural or noun + 's'}"
