"""Reports that lead to their page: with the documentation's address (`gpurig drift --docs-url
URL`, or GPURIG_DOCS_URL), the Markdown and JUnit reports link each finding id to
`URL/findings/ID/` (the page docs/hooks.py makes for every id), the table's last line still
names `gpurig explain ID`; without it, nothing changes. The address is checked (http or https,
a host, nothing a reader cannot see; else exit 2 before any host is read) and escaped where it
is written."""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import click
import pytest
import yaml
from click.core import ParameterSource
from click.testing import CliRunner

from docs import hooks
from gpurig.cli.main import _docs_url, drift, main
from gpurig.node.argv import NodeCall, parse
from gpurig.report import docs_url
from gpurig.report.render import HostReport, render, to_junit, to_markdown, to_table
from gpurig.spec.finding import Finding
from tests.unit.test_cli_drift import free_port, inventory
from tests.unit.test_tool_install import VENV_BIN

ROOT = Path(__file__).resolve().parents[2]
DOCS = "https://docs.example/gpurig"
ERROR = Finding("gpu.xid", "error", "Xid 79", "no Xid", "Xid 79", "drain it", "reboot")
WARN = Finding("repo.dirty", "warn", "uncommitted", "clean", " M a|b.py", "commit them")
REPORTS = [HostReport("a100-1", True, [ERROR, WARN]), HostReport("clean", True, [])]
# Characters Markdown or XML would read as syntax, in a path a site may well have.
ODD = "https://docs.example/a(b)<c>&d|e'f\"g[h]`i\\j/"
ODD_ENCODED = "https://docs.example/a%28b%29%3Cc%3E%26d%7Ce%27f%22g%5Bh%5D%60i%5Cj"


def rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("| ") and "---" not in line]


def test_markdown_links_each_id_to_its_page() -> None:
    text = to_markdown(REPORTS, DOCS)
    [_, error, warn] = rows(text)
    assert "| [`gpu.xid`](https://docs.example/gpurig/findings/gpu.xid/) |" in error
    assert "| [`repo.dirty`](https://docs.example/gpurig/findings/repo.dirty/) |" in warn
    assert render(REPORTS, "markdown", docs_url=DOCS) == text


def test_without_an_address_no_report_links_anything() -> None:
    for fmt in ("markdown", "junit", "table", "json"):
        text = render(REPORTS, fmt)
        assert "findings/" not in text and "docs:" not in text, fmt
    assert "| `gpu.xid` |" in to_markdown(REPORTS)


def test_junit_names_each_finding_s_page() -> None:
    suite = ET.fromstring(to_junit(REPORTS, DOCS).split("?>", 1)[1])
    failure = suite.find("testcase/failure")
    assert failure is not None and failure.get("type") == "gpu.xid"
    assert (failure.text or "").endswith(
        "fix: [reboot] drain it\ndocs: https://docs.example/gpurig/findings/gpu.xid/"
    )
    out = suite.findtext("testcase/system-out") or ""
    assert out.endswith("(docs: https://docs.example/gpurig/findings/repo.dirty/)")
    assert render(REPORTS, "junit", docs_url=DOCS) == to_junit(REPORTS, DOCS)


def test_the_table_keeps_naming_gpurig_explain() -> None:
    assert to_table(REPORTS, docs_url=DOCS).endswith(
        "what a finding means and what to do: gpurig explain ID (e.g. gpu.xid) or its page, "
        "https://docs.example/gpurig/findings/gpu.xid/\n"
    )
    assert to_table(REPORTS).endswith("gpurig explain ID (e.g. gpu.xid)\n")


def test_an_odd_path_stays_one_link_and_well_formed_xml() -> None:
    site = docs_url.checked(ODD)
    page = f"{ODD_ENCODED}/findings/gpu.xid/"
    [_, error, _] = rows(to_markdown(REPORTS, site))
    assert f"| [`gpu.xid`]({page}) |" in error
    assert error.count(" | ") == rows(to_markdown(REPORTS))[1].count(" | ")  # no cell more
    junit = to_junit(REPORTS, site)
    suite = ET.fromstring(junit.split("?>", 1)[1])  # parses
    assert (suite.findtext("testcase/failure") or "").endswith(f"docs: {page}")
    assert "<c>" not in junit and "&d" not in junit


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("https://docs.example/gpurig/", "https://docs.example/gpurig"),
        ("http://10.0.0.5:8000", "http://10.0.0.5:8000"),
        ("HTTPS://Docs.Example/a%20b", "HTTPS://Docs.Example/a%20b"),
    ],
)
def test_a_good_address_is_kept_without_its_trailing_slash(given: str, kept: str) -> None:
    assert docs_url.checked(given) == kept


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("", "empty"),
        ("docs.example/gpurig", "not an http:// or https:// address with a host"),
        ("ftp://docs.example/", "not an http:// or https:// address with a host"),
        ("javascript:alert(1)", "not an http:// or https:// address with a host"),
        ("https://", "not an http:// or https:// address with a host"),
        ("https://docs.example/a b", "' ' in it: no whitespace or control characters"),
        ("https://docs.example/\x1b[31m", "'\\x1b' in it: no whitespace or control characters"),
        ("https://docs.example/\n", "'\\n' in it: no whitespace or control characters"),
        ("https://docs.example/\u202e", "'\\u202e' in it: no whitespace or control characters"),
        ("https://d\u043ecs.example/", "not ASCII"),  # a Cyrillic o
        ("https://ci:token@docs.example/", "a user or password in it"),
        ("https://docs.example/?v=1", "a query or fragment in it"),
        ("https://docs.example/#top", "a query or fragment in it"),
        ("https://docs.example:99999/", "not an address"),
        ("https://docs.example/100%", "a % that starts no %XX escape"),
    ],
)
def test_a_bad_address_is_refused_saying_why(given: str, why: str) -> None:
    with pytest.raises(ValueError) as refused:
        docs_url.checked(given)
    assert str(refused.value).startswith(why)


def test_the_cli_refuses_a_bad_address_before_any_host(tmp_path: Path) -> None:
    fleet = str(inventory(tmp_path, free_port()))
    given = CliRunner().invoke(main, ["drift", fleet, "--docs-url", "ftp://docs.example"])
    assert given.exit_code == 2 and given.stdout == ""
    assert (
        "Invalid value for '--docs-url': 'ftp://docs.example': not an http:// or https:// "
        "address with a host" in given.stderr
    )
    env = CliRunner().invoke(main, ["drift", fleet], env={docs_url.ENV: "https://a b"})
    assert env.exit_code == 2 and env.stdout == ""
    assert (
        "Invalid value for GPURIG_DOCS_URL: 'https://a b': ' ' in it: no whitespace or control "
        "characters" in env.stderr
    )


def test_the_cli_links_the_report_with_the_option_or_the_variable(tmp_path: Path) -> None:
    fleet = str(inventory(tmp_path, free_port()))
    args = ["drift", fleet, "--format", "markdown", "--limit", "dead", "--connect-retries", "0"]
    page = "[`host.unreachable`](https://docs.example/gpurig/findings/host.unreachable/)"
    given = CliRunner().invoke(main, [*args, "--docs-url", f"{DOCS}/"])
    assert given.exit_code == 1 and page in given.stdout, given.output
    env = CliRunner().invoke(main, args, env={docs_url.ENV: DOCS})
    assert env.exit_code == 1 and page in env.stdout, env.output
    empty = CliRunner().invoke(main, args, env={docs_url.ENV: ""})  # unset, as CI leaves it
    assert empty.exit_code == 1 and "findings/" not in empty.stdout, empty.output


def test_a_node_contract_refuses_the_option_and_never_stops_on_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text("engine: none\n")
    args = ["drift", "--local", "--spec", str(spec), "--mode", "npd", "--docs-url", DOCS]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "--docs-url goes without --mode" in result.stderr
    with click.Context(drift) as ctx:
        ctx.set_parameter_source("docs_url", ParameterSource.ENVIRONMENT)
        assert _docs_url("not an address", "npd") is None
    # The contracts' own command line: the variable leaves a report without a mode to click,
    # which checks it; a contract reads its words as ever.
    monkeypatch.setenv(docs_url.ENV, DOCS)
    assert parse(["drift", "--local", "--spec", str(spec)]) is None
    assert parse(["drift", "--local", "--spec", str(spec), "--mode", "npd"]) == NodeCall(
        "drift", spec_file=str(spec), mode="npd"
    )
    monkeypatch.delenv(docs_url.ENV)
    assert parse(["drift", "--local", "--spec", str(spec)]) == NodeCall(
        "drift", spec_file=str(spec)
    )


def test_the_published_site_and_the_ci_example_carry_the_address() -> None:
    """Whoever publishes the site sets GPURIG_DOCS_URL (mkdocs.yml's site_url): the CI guide
    then names the address; the example workflow hands the repository's variable to drift."""
    mkdocs = (ROOT / "mkdocs.yml").read_text()
    assert f"\nsite_url: !ENV [{docs_url.ENV}, null]\n" in mkdocs
    guide = (ROOT / "docs" / "guides" / "ci.md").read_text()
    built = hooks.on_page_markdown(guide, config={"repo_url": None, "site_url": f"{DOCS}/"})
    assert f"`{DOCS}`" in built and hooks.DOCS_URL not in built
    assert "--docs-url URL" in built and docs_url.ENV in built
    assert hooks.DOCS_URL in hooks.on_page_markdown(guide, config={"site_url": None})
    workflow = yaml.safe_load((ROOT / "examples" / "github-actions-drift.yml").read_text())
    [check] = [s for s in workflow["jobs"]["drift"]["steps"] if s.get("id") == "drift"]
    assert check["env"] == {docs_url.ENV: "${{ vars.GPURIG_DOCS_URL }}"}


def test_the_link_is_the_address_mkdocs_serves_the_id_s_page_at() -> None:
    """docs/hooks.py writes findings/ID.md for every id; MkDocs (directory URLs, its default:
    mkdocs.yml keeps it) serves it at findings/ID/."""
    assert "use_directory_urls" not in (ROOT / "mkdocs.yml").read_text()
    generated = hooks.pages()
    for finding_id in (ERROR.id, WARN.id, "host.unreachable"):
        assert f"findings/{finding_id}.md" in generated
        assert docs_url.page(DOCS, finding_id) == f"{DOCS}/findings/{finding_id}/"


def test_this_machine_s_report_links_too_as_root(tmp_path: Path) -> None:
    """`gpurig drift --local` as root keeps GPURIG_DOCS_URL through the environment it scrubs
    (gpurig.root_env): checked, then written into the report alone."""
    spec = tmp_path / "node.yaml"
    spec.write_text("engine: none\ncore_dumps: enabled\npackages: [gpurig-no-such-package]\n")
    argv = [str(VENV_BIN / "gpurig"), "drift", "--local", "--spec", str(spec), "--format"]
    env = {**os.environ, docs_url.ENV: DOCS}
    run = subprocess.run([*argv, "markdown"], env=env, capture_output=True, text=True)
    page = f"[`packages.missing`]({DOCS}/findings/packages.missing/)"
    assert run.returncode == 1 and page in run.stdout, run.stdout + run.stderr
    env[docs_url.ENV] = "file:///etc/passwd"
    run = subprocess.run([*argv, "junit"], env=env, capture_output=True, text=True)
    assert run.returncode == 2 and "Invalid value for GPURIG_DOCS_URL" in run.stderr
