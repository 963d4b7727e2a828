"""Counts in words: the noun singular for one, plural otherwise (gpurig.spec.words)."""

from __future__ import annotations

import pytest

from gpurig.spec.words import counted


@pytest.mark.parametrize(
    ("count", "noun", "plural", "said"),
    [
        (1, "host", None, "1 host"),
        (0, "host", None, "0 hosts"),
        (2, "host", None, "2 hosts"),
        (5000, "host", None, "5000 hosts"),
        (1, "other host", None, "1 other host"),
        (2, "process", "processes", "2 processes"),
        (1, "process", "processes", "1 process"),
        (1.0, "CPU", None, "1 CPU"),
        (0.5, "CPU", None, "0.5 CPUs"),
        (2.0, "CPU", None, "2 CPUs"),
    ],
)
def test_a_count_says_its_noun_singular_for_one(
    count: float, noun: str, plural: str | None, said: str
) -> None:
    assert counted(count, noun, plural) == said
