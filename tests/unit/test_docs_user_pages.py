"""The user pages speak of use: what a user types, sees and decides. How gpurig is built and
tested (its source files, its tests, its benchmarks' scripts) lives on the architecture,
contributing and benchmarks pages. Each user page, with the README passages it includes,
names no repository source or test path but the few a user types. (A file a page includes
whole, an example a user copies, is shown as it is: its comments are its own.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docs import hooks

ROOT = Path(hooks.__file__).resolve().parents[1]
DOCS = ROOT / "docs"
USER_PAGES = [
    DOCS / "index.md",
    DOCS / "install.md",
    DOCS / "getting-started.md",
    *sorted((DOCS / "guides").glob("*.md")),
    DOCS / "concepts.md",
    DOCS / "troubleshooting.md",
    DOCS / "node-contracts.md",
    DOCS / "metrics.md",
]
# What a user types, and why: nothing else of the repository's source and tests.
ALLOWED = {
    "inventory.py": "the checkout's pyinfra inventory, on pyinfra's command line",
    "deploys/gpu_host.py": "the checkout's deploy, on pyinfra's command line",
    "deploys/": "where that deploy lives in a checkout",
    "scripts/setup.sh": "makes a checkout's environment",
    "scripts/wheelhouse.sh": "builds the wheels a node installs from",
    "scripts/node_deb.sh": "builds the node's offline .deb",
    "scripts/demo.sh": "the demo",
    "tests/verify": "the host checks run against converged hosts (pytest tests/verify)",
    "gpurig/dist/gpurig-*-py3-none-any.whl": "the wheel a clone named gpurig builds",
}
_SUBPACKAGES = sorted(p.parent.name for p in (ROOT / "gpurig").glob("*/__init__.py"))
# A path under a source or test directory; a `.py` file's name; a module of the tests or of a
# gpurig subpackage by its dotted name (`python -m tests.x`, `gpurig.read.x`; a finding id
# such as `gpurig.internal_error` is neither). Not a path inside another (`/etc/gpurig/...`).
SOURCE = re.compile(
    r"(?<![\w./~$-])(?:"
    r"(?:tests|gpurig|deploys|facts|scripts|benchmarks)/[\w.*<>/-]*"
    r"|[\w-]+\.py\b"
    rf"|(?:tests|gpurig\.(?:{'|'.join(_SUBPACKAGES)}))\.[a-z_][\w.]*"
    r")"
)


def source_paths(text: str) -> list[str]:
    """Each repository source or test path `text` names, as written, in order."""
    return SOURCE.findall(text)


def shown(page: Path) -> str:
    """The page's own words: as written, with the README passages it includes."""
    return hooks.INCLUDE.sub(
        lambda m: m[0] if m["kind"] == "FILE" else hooks.included(m["kind"], m["what"]),
        page.read_text(encoding="utf-8"),
    )


def test_what_counts_as_a_source_path() -> None:
    text = (
        "see `gpurig/checks/gpu.py`, `facts/round_trip.py` and tests/unit/test_plans.py; "
        "`python -m tests.finding_examples`; `gpurig.read.acceptance.ACCEPTANCE_SCRIPT`; "
        "benchmarks/README.md; json.py; scripts/docs.sh"
    )
    assert source_paths(text) == [
        "gpurig/checks/gpu.py", "facts/round_trip.py", "tests/unit/test_plans.py",
        "tests.finding_examples", "gpurig.read.acceptance.ACCEPTANCE_SCRIPT",
        "benchmarks/README.md", "json.py", "scripts/docs.sh",
    ]  # fmt: skip
    not_source = (
        "/etc/gpurig/node.yaml /opt/gpurig/bin/python ~/.local/state/gpurig/logs/ "
        "`gpurig.internal_error` `gpurig explain gpu.xid` examples/npd-gpurig.json "
        "inventories/examples/profiles.yaml https://example.org/gpurig/tests/x.py "
        "*.py gpurig: ok"
    )
    assert source_paths(not_source) == []


@pytest.mark.parametrize("page", USER_PAGES, ids=[str(p.relative_to(DOCS)) for p in USER_PAGES])
def test_a_user_page_names_no_source_or_test_path(page: Path) -> None:
    named = [path for path in source_paths(shown(page)) if path not in ALLOWED]
    assert named == [], f"{page.relative_to(ROOT)}: {len(named)} source or test paths: {named}"


def test_the_allowed_paths_are_the_checkout_s() -> None:
    """Each path the pages may name is one a checkout has (the wheel's, a build's output,
    aside): an allowance outliving its file would let the pages name a path that is gone."""
    for path in ALLOWED:
        if "*" not in path:
            assert (ROOT / path).exists(), path
