"""The built site as a reader meets it: code blocks keep their lines (a report's columns line
up only unwrapped) with the copy button beside the text, not over it; and a page fetches
nothing from another host (no Google Fonts, no script or stylesheet from a CDN), so the site
works served on an air-gapped network. scripts/docs_screenshots.py shows both in Chromium."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CSS = ROOT / "docs" / "stylesheets" / "extra.css"
# What lets a line break inside a code block.
WRAPPING = re.compile(
    r"white-space\s*:\s*(pre-wrap|pre-line|normal|break-spaces)"
    r"|overflow-wrap\s*:\s*(anywhere|break-word)|word-wrap\s*:\s*break-word"
    r"|word-break\s*:\s*(break-all|break-word)"
)


def rules(css: str) -> list[tuple[str, str]]:
    """(selector, declarations) of each rule, those inside an @media block too."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    return [(m[1].strip(), m[2]) for m in re.finditer(r"([^{}]+)\{([^{}]*)\}", css)]


def code_block_rules(css: str) -> list[tuple[str, str]]:
    return [(s, d) for s, d in rules(css) if re.search(r"\bpre\b", s)]


def test_no_rule_wraps_a_code_block_s_lines() -> None:
    found = code_block_rules(CSS.read_text(encoding="utf-8"))
    assert any(s == ".md-typeset pre > code" for s, _ in found)
    wrapping = [f"{s} {{{d.strip()}}}" for s, d in found if WRAPPING.search(d)]
    assert wrapping == []


def test_a_code_block_keeps_a_gutter_for_its_copy_button() -> None:
    """Material's copy button sits at the block's top right; the text scrolls in a box that
    ends before it (a right border of the block's colour), so no scroll puts text under it."""
    [declarations] = [d for s, d in rules(CSS.read_text(encoding="utf-8"))
                      if s == ".md-typeset pre > code"]  # fmt: skip
    assert re.search(r"white-space\s*:\s*pre\s*;", declarations)
    gutter = re.search(r"border-right\s*:\s*([\d.]+)rem solid var\(--md-code-bg-color\)",
                       declarations)  # fmt: skip
    # The button: 1.5em of the block's 0.68rem text, 0.2rem padding each side, 0.25em in.
    assert gutter and float(gutter[1]) >= 1.5 * 0.68 + 0.4 + 0.25 * 0.68


def test_the_checks_see_a_wrapping_rule() -> None:
    wrapped = ".md-typeset pre > code {\n  white-space: pre-wrap;\n}\n@media x { pre { a: b } }"
    assert [s for s, d in code_block_rules(wrapped) if WRAPPING.search(d)] == [
        ".md-typeset pre > code"
    ]
    assert [s for s, _ in code_block_rules(wrapped)][1] == "pre"


# A resource a page loads by itself (not a link a reader follows): scripts, stylesheets,
# fonts, images, frames, and the hosts a page preconnects to.
LOADED = re.compile(
    r"<(?:script|img|iframe|source)\b[^>]*\bsrc=[\"'](?P<src>[^\"']+)"
    r"|<link\b[^>]*\bhref=[\"'](?P<href>[^\"']+)"
    r"|url\(\s*[\"']?(?P<url>[^\"')]+)"
    r"|@import\s+[\"'](?P<imported>[^\"']+)",
    re.I,
)


def external(text: str) -> list[str]:
    """What a page or stylesheet loads from another host."""
    found = []
    for match in LOADED.finditer(text):
        target = next(v for v in match.groupdict().values() if v)
        if re.match(r"(https?:)?//", target) or "fonts.g" in target:
            found.append(target)
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "mkdocs", "build", "--quiet", "--site-dir", str(built)]
    subprocess.run(command, cwd=ROOT, check=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    return built


def test_no_page_loads_anything_from_another_host(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 100
    loaded = {}
    for path in [*pages, *site.rglob("*.css")]:
        text = path.read_text(encoding="utf-8")
        found = external(text) + re.findall(r"fonts\.(?:googleapis|gstatic)\.com", text)
        if found:
            loaded[str(path.relative_to(site))] = found
    assert loaded == {}


def test_the_scan_sees_what_a_page_would_fetch() -> None:
    page = (
        '<link rel="preconnect" href="https://fonts.gstatic.com" crossorigin>'
        '<link rel="stylesheet" href="../assets/main.css">'
        '<script src="//cdn.example/x.js"></script><a href="https://example.org/">a link</a>'
    )
    assert external(page) == ["https://fonts.gstatic.com", "//cdn.example/x.js"]
    assert external("@font-face{src:url(https://fonts.gstatic.com/s/roboto.woff2)}") == [
        "https://fonts.gstatic.com/s/roboto.woff2"
    ]
