"""The package's wings and the one way its imports run (issue 28; DESIGN: layout): the CLI on
top, nothing imports it; the core (spec, read, plans, checks, report, data, and the readers in
facts/) imports no edge wing and nothing of pyinfra, gevent, paramiko or invoke; the node
contracts reach pyinfra only from inside the function that converges; and no two modules
import each other, directly or in a ring. Read from the sources' own import statements."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ("spec", "read", "plans", "checks", "report", "data", "facts")
EDGE = ("remote", "node", "onboard", "cli", "sandbox", "deploys")
SSH_STACK = ("pyinfra", "pyinfra_cli", "gevent", "paramiko", "invoke")


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "gpurig").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(p for p in parts if p != "__init__")] = path
    for top in ("facts", "deploys"):
        for path in sorted((ROOT / top).glob("*.py")):
            name = path.stem
            found[f"gpurig.{top}" + ("" if name == "__init__" else f".{name}")] = path
    return found


def imports(path: Path) -> Iterator[tuple[str, bool]]:
    """(module imported, whether at module level) for each import in the file; `from X import
    y` yields X.y too, which is a module where y is one."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in top_level
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module, id(node) in top_level
            for alias in node.names:
                yield f"{node.module}.{alias.name}", id(node) in top_level


def wing(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "gpurig" and len(parts) > 2 else None


def graph(top_only: bool) -> dict[str, set[str]]:
    known = modules()
    return {
        name: {m for m, top in imports(path) if m in known and m != name and (top or not top_only)}
        for name, path in known.items()
    }


def test_every_module_lives_in_a_wing() -> None:
    loose = [m for m in modules() if m.count(".") == 1 and m.split(".")[1] not in
             (*CORE, *EDGE, "fsutil", "safe_path", "__main__")]  # fmt: skip
    assert loose == []


def test_nothing_imports_the_cli() -> None:
    found = graph(top_only=False)
    users = {m for m, deps in found.items() for d in deps if wing(d) == "cli"}
    assert {m for m in users if wing(m) != "cli"} == {"gpurig.__main__"}


def test_the_core_imports_no_edge_and_no_ssh_stack() -> None:
    wrong = []
    for name, path in modules().items():
        if wing(name) not in CORE:
            continue
        for imported, _ in imports(path):
            if wing(imported) in EDGE or imported.split(".")[0] in SSH_STACK:
                wrong.append(f"{name} imports {imported}")
    assert wrong == []


def test_the_node_reaches_pyinfra_only_to_converge() -> None:
    """At module level a node module imports no edge wing but the node's own; the one
    function-level way out is up's converge."""
    wrong = []
    for name, path in modules().items():
        if wing(name) != "node":
            continue
        for imported, top in imports(path):
            edge = wing(imported) in ("remote", "onboard", "cli", "deploys")
            ssh = imported.split(".")[0] in SSH_STACK
            if (edge or ssh) and (top or name != "gpurig.node.up"):
                wrong.append(f"{name} imports {imported}")
    assert wrong == []


def test_no_import_ring() -> None:
    found = graph(top_only=True)
    rings = []
    for start in found:
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in found.get(node, ()):
                if nxt == start:
                    rings.append(" -> ".join([*path, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert rings == []
