"""A node contract runs five stages, each once, in order (gpurig/node/run.py: run_mode), and the
architecture page draws the same five, by the same names, each with the files that own it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "gpurig" / "node" / "run.py"
PAGE = ROOT / "docs" / "architecture.md"
STAGES = ["read", "judge", "govern", "act", "say"]


def run_mode_calls() -> list[str]:
    """The names of the functions run_mode calls, in the order its statements call them."""
    tree = ast.parse(RUN.read_text(encoding="utf-8"))
    body = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run_mode")
    return [
        node.func.id
        for statement in body.body
        for node in ast.walk(statement)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    ]


def test_run_mode_calls_each_stage_once_in_order() -> None:
    calls = [name for name in run_mode_calls() if name in STAGES]
    assert calls == STAGES
    defined = {n.name for n in ast.parse(RUN.read_text(encoding="utf-8")).body
               if isinstance(n, ast.FunctionDef)}  # fmt: skip
    assert set(STAGES) <= defined


def page_stages() -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The page's drawing of the stages (`a -> b -> ...`) and its table: each stage's name and
    the files it names."""
    text = PAGE.read_text(encoding="utf-8")
    drawn = next(line.split(" -> ") for line in text.splitlines() if line.count(" -> ") >= 4)
    rows = [
        (match.group(1), re.findall(r"`((?:gpurig|facts)/[\w/]+\.py)`", match.group(2)))
        for match in re.finditer(r"^\| `(\w+)` \|(.*)\|$", text, re.M)
        if match.group(1) in STAGES
    ]
    return [word.strip() for word in drawn], rows


def test_the_page_draws_the_code_s_stages_each_with_files_that_exist() -> None:
    drawn, rows = page_stages()
    assert drawn == STAGES
    assert [name for name, _ in rows] == STAGES
    for name, files in rows:
        assert files, name
        assert [f for f in files if not (ROOT / f).is_file()] == [], name
    assert "gpurig/node/run.py" in PAGE.read_text(encoding="utf-8")
