"""The findings pages (docs/hooks.py) and `gpurig explain` know one set of ids: each id explain
answers has its page, its row in the catalogue and its line in `gpurig explain --list`, the
grouped `CONCERN.differs` ids too; each page is titled with its id as written."""

from __future__ import annotations

import re

from click.testing import CliRunner
from mkdocs.utils.meta import get_data

from docs import hooks
from gpurig.cli.main import main
from gpurig.plans import CHANGE_IDS
from gpurig.report import explain


def test_every_id_explain_knows_has_a_page_a_catalogue_row_and_a_list_line() -> None:
    candidates = {*explain.texts()["findings"], *(f"{i.split('.')[0]}.differs" for i in CHANGE_IDS)}
    run = CliRunner().invoke
    knows = {i for i in candidates if run(main, ["explain", i]).exit_code == 0}
    pages = {p.removeprefix("findings/").removesuffix(".md") for p in hooks.pages()
             if p.startswith("findings/")}  # fmt: skip
    rows = set(re.findall(r"^\| \[`([\w.]+)`\]\(\.\./findings/\1\.md\) \|",
                          hooks.findings_reference(), re.M))  # fmt: skip
    listed = {line.split()[0] for line in run(main, ["explain", "--list"]).output.splitlines()}
    assert {"container.differs", "engine.differs", "repo.differs", "toolkit.differs"} <= knows
    assert knows == pages == rows == listed == set(explain.explained_ids())


def test_each_findings_page_is_titled_with_its_id_as_written() -> None:
    """MkDocs would title a page whose first line is not its heading by its file's name
    (`Container.shm size`): the page says its title."""
    for path, page in hooks.pages().items():
        if path.startswith("findings/"):
            finding_id = path.removeprefix("findings/").removesuffix(".md")
            body, meta = get_data(page)
            assert meta.get("title") == finding_id and f"\n# {finding_id}\n" in body


def test_a_grouped_id_s_page_lists_its_ids_and_the_examples_that_show_it() -> None:
    page = hooks.pages()["findings/container.differs.md"]
    assert "[`container.shm_size`](container.shm_size.md)" in page
    assert "Reported as `container.differs` on the pages of" in page
    assert "[`container.command`](container.command.md)" in page
