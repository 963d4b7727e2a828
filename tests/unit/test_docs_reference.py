"""The documentation's generated reference (docs/hooks.py): every key of the inventory's schema
is in the spec reference, every id in the findings catalogue, every command in the CLI
reference, and every page's includes resolve to what they name."""

from __future__ import annotations

import re
from pathlib import Path

from docs import hooks
from gpurig.report.explain import catalogue_ids

DOCS = Path(hooks.__file__).parent


def test_every_schema_property_is_in_the_spec_reference() -> None:
    page = hooks.spec_reference()
    documented = {cell.split(".")[-1] for cell in re.findall(r"^\| `([\w.\[\]]+)` \|", page, re.M)}
    missing = sorted(hooks.schema_keys() - documented)
    assert not missing, f"spec reference: no row for {missing}"
    assert "| `engine` |" in page and "`engine: docker`: Docker's daemon runs as root" in page
    assert "| `recreate` |" in page and "`if-stopped`" in page  # the loader's default


def test_every_id_and_command_has_its_reference() -> None:
    findings, pages = hooks.findings_reference(), hooks.pages()
    for finding_id in catalogue_ids():  # a row in the catalogue, and a page of its own
        assert f"| [`{finding_id}`](../findings/{finding_id}.md) |" in findings
        assert f"\n# {finding_id}\n" in pages[f"findings/{finding_id}.md"]
    cli = hooks.cli_reference()
    for command in ("drift", "explain", "up", "validate", "compat", "sandbox up"):
        assert f"\n## gpurig {command}\n" in cli
    metrics = hooks.metrics_reference()
    assert "`gpurig_drift_findings`" in metrics and 'id="gpu.xid"' in metrics


def test_every_include_in_the_pages_resolves() -> None:
    pages = sorted(DOCS.rglob("*.md"))
    found = [m for page in pages for m in hooks.INCLUDE.finditer(page.read_text())]
    assert len(found) >= 5
    for match in found:
        text = hooks.included(match["kind"], match["what"])
        markdown = match["what"].endswith(".md")  # a Markdown file is included as it is
        assert text.startswith("# " if markdown else ("```", "**")), match["what"]


def test_a_findings_page_links_the_other_ids_it_names() -> None:
    linked = hooks._linked("As container.image; run `gpurig explain gpu.xid`; `gpu.xid`.", "x")
    assert linked == (
        "As [container.image](container.image.md); run `gpurig explain gpu.xid`; "
        "[`gpu.xid`](gpu.xid.md)."
    )


def test_every_key_in_the_spec_reference_says_what_it_means() -> None:
    rows = re.findall(r"^\| `([\w.\[\]]+)` \|(.*)\|$", hooks.spec_reference(), re.M)
    assert len(rows) > 90
    empty = [key for key, cells in rows if not cells.split(" | ")[-1].strip()]
    assert empty == [], f"keys without a description in the schema: {empty}"


def test_no_generated_text_is_read_as_html() -> None:
    """Angle brackets in a table's or a page's plain text (`'<type> <base64>'`, `<iface>`) would
    be taken for HTML tags and vanish from the page: outside code they are escaped."""
    swallowed = []
    for name, page in hooks.pages().items():
        fenced = False
        for line in page.splitlines():
            fenced ^= line.startswith("```")
            bare = re.sub(r"`[^`]*`", "", line)
            if not fenced and not line.startswith(("<!--", "```")) and re.search("<[\\w]", bare):
                swallowed.append(f"{name}: {line[:120]}")
    assert swallowed == []
    assert "a host key: '&lt;type&gt; &lt;base64&gt;'" in hooks.spec_reference()


def test_a_guide_test_marker_leaves_the_page_and_its_block_stays() -> None:
    page = "Onboard:\n\n<!-- guide-test: onboard -->\n```sh\ngpurig onboard\n```\n"
    assert hooks.on_page_markdown(page) == "Onboard:\n\n```sh\ngpurig onboard\n```\n"
    steps = [
        m["step"] for m in hooks.GUIDE_TEST.finditer((DOCS / "guides" / "rental.md").read_text())
    ]
    assert steps[:2] == ["given", "onboard"]


def test_a_site_built_with_the_repository_s_address_names_it() -> None:
    """Whoever publishes the site sets GPURIG_REPO_URL (mkdocs.yml's repo_url): the quick
    start's clone line then names it; without it, the placeholder stays for a reader to fill."""
    home = (Path(hooks.__file__).parent / "index.md").read_text()
    url = "https://git.example/team/gpurig"
    built = hooks.on_page_markdown(home, config={"repo_url": url})
    assert f"uv tool install git+{url}" in built and hooks.REPOSITORY_URL not in built
    assert hooks.REPOSITORY_URL in hooks.on_page_markdown(home, config={"repo_url": None})
