"""CHANGELOG.md (the site's changelog page includes it): what is not released yet under
"Unreleased" first, then each release as `## VERSION - YYYY-MM-DD`, newest first, the newest
being the version pyproject.toml declares."""

from __future__ import annotations

import datetime
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RELEASE = re.compile(r"(?P<version>\d+\.\d+\.\d+) - (?P<date>\d{4}-\d{2}-\d{2})")


def wrong_sections(changelog: str, version: str) -> list[str]:
    """What is wrong with the changelog's sections; [] when each has its version and date."""
    headings = re.findall(r"^## (.*)$", changelog, re.M)
    wrong = [f"not first: {h!r}" for h in headings[1:] if h == "Unreleased"]
    releases = []
    for heading in headings:
        if heading == "Unreleased":
            continue
        match = RELEASE.fullmatch(heading)
        if match is None:
            wrong.append(f"no 'VERSION - YYYY-MM-DD': {heading!r}")
            continue
        date = datetime.date.fromisoformat(match["date"])
        releases.append((tuple(int(n) for n in match["version"].split(".")), date))
    if releases and releases != sorted(releases, reverse=True):
        wrong.append("releases not newest first")
    if not releases or ".".join(map(str, releases[0][0])) != version:
        wrong.append(f"the newest release is not pyproject.toml's {version}")
    return wrong


def test_each_release_has_its_version_and_date_newest_first() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert wrong_sections((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), version) == []


def test_a_section_without_its_date_is_seen() -> None:
    assert wrong_sections("## Unreleased\n## 0.1.0\n", "0.1.0") == [
        "no 'VERSION - YYYY-MM-DD': '0.1.0'",
        "the newest release is not pyproject.toml's 0.1.0",
    ]
    assert wrong_sections("## 0.1.0 - 2026-11-26\n## 0.2.0 - 2026-12-01\n", "0.1.0") == [
        "releases not newest first"
    ]
