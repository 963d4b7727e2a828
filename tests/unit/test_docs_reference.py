"""The documentation's generated reference (docs/hooks.py): every key of the inventory's schema
is in the spec reference, every id in the findings catalogue, every command in the CLI
reference, and every page's includes resolve to what they name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docs import hooks
from gpurig.report.explain import catalogue_ids

DOCS = Path(hooks.__file__).parent


KEY = re.compile(r"^### `(?P<key>[\w.\[\]]+)` \{ #(?P<anchor>[\w.]+) \}\n\n(?P<body>.*?)(?=^##|\Z)",
                 re.M | re.S)  # fmt: skip


def keys() -> dict[str, re.Match[str]]:
    return {m["anchor"]: m for m in KEY.finditer(hooks.spec_reference())}


def test_every_schema_property_is_in_the_spec_reference() -> None:
    page = hooks.spec_reference()
    documented = {m["key"].split(".")[-1].removesuffix("[]") for m in keys().values()}
    missing = sorted(hooks.schema_keys() - documented)
    assert not missing, f"spec reference: no section for {missing}"
    assert (
        "### `engine` { #engine }" in page
        and "`engine: docker`: Docker's daemon runs as root" in page
    )
    assert "- **Default**: `if-stopped`" in keys()["containers.recreate"]["body"]  # the loader's


def test_every_key_has_its_anchor_type_default_required_and_example() -> None:
    """Linkable (`#containers.shm_size`), with its type, default (or "none" and why), whether
    it is required, and an example: a key missing one stops the build."""
    found = keys()
    assert len(found) > 90 and {"containers.shm_size", "ssh.port", "ssh.connect_timeout",
                                "node_contracts.drain_budget.same_id"} <= set(found)  # fmt: skip
    for anchor, match in found.items():
        body = match["body"]
        for label in ("**Type**", "**Default**", "**Required**"):
            assert f"- {label}: " in body, f"{anchor}: no {label}"
        assert "```yaml\n" in body, f"{anchor}: no example"
        assert body.split("\n", 1)[0].strip(), f"{anchor}: says nothing of what it means"
    assert "- **Default**: `3`" in found["node_contracts.drain_budget.same_id"]["body"]
    assert "- **Default**: `22`" in found["ssh.port"]["body"]


def test_a_key_without_a_default_or_a_reason_stops_the_build(monkeypatch) -> None:
    document = hooks.schema()
    del document["$defs"]["ssh"]["properties"]["connect_timeout"]["x-no-default"]
    monkeypatch.setattr(hooks, "schema", lambda: document)
    with pytest.raises(ValueError, match="ssh key connect_timeout has no default"):
        hooks.spec_reference()


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


def test_no_generated_text_is_read_as_html() -> None:
    """Angle brackets in a table's or a page's plain text (`'<type> <base64>'`, `<iface>`) would
    be taken for HTML tags and vanish from the page: outside code they are escaped."""
    swallowed = []
    for name, page in hooks.pages().items():
        if not name.endswith(".md"):
            continue
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


def test_an_example_copied_from_the_site_names_the_sites_schema() -> None:
    """In a checkout the examples name `../../schemas/inventory.schema.json` (an editor resolves
    it from the file); the published page names the site's copy, which a copied file reaches."""
    assert hooks.CHECKOUT_SCHEMA in (hooks.ROOT / "inventories/examples/example.yaml").read_text()
    published = hooks.spec_reference("https://docs.example/gpurig/")
    assert "$schema=https://docs.example/gpurig/inventory.schema.json" in published
    assert hooks.CHECKOUT_SCHEMA not in published
    assert "inventory.schema.json" in hooks.pages()
