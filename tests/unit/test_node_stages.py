"""A node contract runs five stages, each once, in order (gpurig/node/run.py: run_mode), and the
architecture page draws the same five, by the same names, each with the files that own it."""

from __future__ import annotations

import ast
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

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


def module_of(path: str) -> str | None:
    """The module a code object's file is (facts/ read as gpurig.facts), None outside."""
    try:
        parts = Path(path).resolve().relative_to(ROOT).with_suffix("").parts
    except ValueError:
        return None
    if parts[0] in ("facts", "deploys"):
        parts = ("gpurig", *parts)
    return ".".join(p for p in parts if p != "__init__") if parts[0] == "gpurig" else None


def traced(mode_name: str, spec: Path) -> tuple[list[tuple[str, str, str]], list[str]]:
    """A real contract run (`run_mode`, this machine read) traced: each call run_mode and its
    five stages make into the package, in order, as (caller, module, function), and the calls
    that climb to a higher layer than the module making them (test_layout.LAYERS)."""
    from test_layout import layer

    from gpurig.node import modes, run
    from gpurig.spec.inventory import load_spec_file

    host = load_spec_file(spec, "traced")
    callers = {run.run_mode.__code__, *(getattr(run, s).__code__ for s in STAGES)}
    calls: list[tuple[str, str, str]] = []
    climbs: list[str] = []

    def profile(frame: Any, event: str, _arg: object) -> None:
        if event != "call" or frame.f_back is None or frame.f_back.f_code not in callers:
            return
        callee = module_of(frame.f_code.co_filename)
        if callee is None or frame.f_code.co_name.startswith("<"):  # a NamedTuple's __new__
            return
        caller = module_of(frame.f_back.f_code.co_filename) or ""
        calls.append((frame.f_back.f_code.co_name, callee, frame.f_code.co_name))
        if (layer(callee) or 0) > (layer(caller) or 0):
            climbs.append(f"{caller} calls {callee}.{frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        status = run.run_mode(modes.mode(mode_name), host, time.monotonic(), "text", None, None)
    finally:
        sys.setprofile(None)
    assert status in (0, 1, 2)
    return calls, climbs


def stays(calls: list[tuple[str, str, str]]) -> list[tuple[str, list[str]]]:
    """Consecutive calls into one module, as one stay: (module, its functions called)."""
    found: list[tuple[str, list[str]]] = []
    for _, module, function in calls:
        if found and found[-1][0] == module:
            found[-1][1].append(function)
        else:
            found.append((module, [function]))
    return found


def test_following_the_npd_contract_from_run_mode_takes_twelve_stays_and_no_climb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a reader holds to follow the npd contract: run_mode, its stages and what each stage
    calls, module by module. At most 12 stays, no call up a layer, each stage entered once,
    and no stage going back to a module it left."""
    spec = tmp_path / "node.yaml"
    spec.write_text("engine: none\ncore_dumps: disabled\nchecks: {disk_free_min: 1k}\n")
    monkeypatch.setenv("GPURIG_RUNTIME_DIR", str(tmp_path / "run"))
    calls, climbs = traced("npd", spec)
    found = stays(calls)
    said = "\n".join(f"{module}: {', '.join(functions)}" for module, functions in found)
    assert len(found) <= 12, said
    assert climbs == []
    assert [f for caller, _, f in calls if caller == "run_mode" and f in STAGES] == STAGES
    for stage in STAGES:
        modules = [module for module, _ in stays([c for c in calls if c[0] == stage])]
        assert len(modules) == len(set(modules)), (stage, modules)
