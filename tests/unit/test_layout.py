"""The package's wings and the one way its imports run (DESIGN: layout): the CLI on top,
nothing imports it; the core (spec, read, plans, checks, report, data, and the readers in
facts/) imports no edge wing and nothing of pyinfra, gevent, paramiko or invoke; every module
imports only from its own layer and those below (LAYERS); the node contracts reach pyinfra only
from inside the function that converges; no two modules import each other, directly or in a
ring, even through a function. Read from the sources' own import statements, in every form
Python has."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

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


def imports(path: Path, module: str = "") -> Iterator[tuple[str, bool]]:
    """(module imported, whether on import) for each import in the file `module` names: `import
    X`, `from X import y` (and X.y, which is a module where y is one), relative imports resolved
    against the file's package, and `importlib.import_module` (or `__import__`) of a literal.
    On import means outside any function and any `if TYPE_CHECKING:` block."""
    return imports_in(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")


def imports_in(source: str, module: str, package: bool = False) -> Iterator[tuple[str, bool]]:
    """imports() of `source`, the text of `module` (a package's `__init__` when `package`)."""
    here = module if package else module.rpartition(".")[0]
    for node, on_import in _walk(ast.parse(source), True):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, on_import
        elif isinstance(node, ast.ImportFrom):
            base = _resolved(node.module or "", node.level, here)
            yield base, on_import
            for alias in node.names:
                yield f"{base}.{alias.name}", on_import
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in DYNAMIC and node.args:
            name = _literal(node.args[0])
            anchor = next((_literal(k.value) for k in node.keywords if k.arg == "package"), None)
            if name is not None:
                dots = len(name) - len(name.lstrip("."))
                yield _resolved(name[dots:], dots, anchor or here), on_import


DYNAMIC = ("importlib.import_module", "import_module", "__import__")


def _walk(node: ast.AST, on_import: bool) -> Iterator[tuple[ast.AST, bool]]:
    """Every node below `node`, with whether it runs when the module is imported: not inside
    a function, nor in the body of `if TYPE_CHECKING:` (its else branch runs)."""
    for child in ast.iter_child_nodes(node):
        yield child, on_import
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            yield child.test, on_import
            for statement in child.body:
                yield from ((n, False) for n in ast.walk(statement))
            for statement in child.orelse:
                yield statement, on_import
                yield from _walk(statement, on_import)
            continue
        function = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield from _walk(child, on_import and not function)


def _resolved(name: str, level: int, package: str) -> str:
    """`name` imported `level` dots up from `package` (level 0: as written)."""
    if not level:
        return name
    parts = package.split(".")
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def wing(module: str) -> str | None:
    """The wing `module` belongs to (its package's own `__init__` included), or None."""
    parts = module.split(".")
    if parts[0] == "gpurig" and len(parts) > 1 and parts[1] in (*CORE, *EDGE):
        return parts[1]
    return None


def graph(top_only: bool) -> dict[str, set[str]]:
    known = modules()
    return {
        name: {
            m
            for m, top in imports(path, name)
            if m in known and m != name and (top or not top_only)
        }
        for name, path in known.items()
    }


def test_every_module_lives_in_a_wing() -> None:
    top = ("fsutil", "safe_path", "root_env", "named_tuple", "__main__")
    loose = [m for m in modules() if m.count(".") == 1 and m.split(".")[1] not in
             (*CORE, *EDGE, *top)]  # fmt: skip
    assert loose == []


def test_nothing_imports_the_cli() -> None:
    found = graph(top_only=False)
    users = {m for m, deps in found.items() for d in deps if wing(d) == "cli"}
    assert {m for m in users if wing(m) != "cli"} == {"gpurig.__main__"}


def edge_imports(name: str, found: Iterable[tuple[str, bool]]) -> list[str]:
    """The imports among `found` (module `name`'s) that the core may not make."""
    return [f"{name} imports {imported}" for imported, _ in found
            if wing(imported) in EDGE or imported.split(".")[0] in SSH_STACK]  # fmt: skip


def test_the_core_imports_no_edge_and_no_ssh_stack() -> None:
    core = {name: path for name, path in modules().items() if wing(name) in CORE}
    assert [w for name, path in core.items() for w in edge_imports(name, imports(path, name))] == []


# Each way a module can import another: (the line, the module it imports), as written in
# gpurig/spec/model.py.
FORMS = [
    ("import gpurig.cli", "gpurig.cli"),
    ("import gpurig.remote.guard as guard", "gpurig.remote.guard"),
    ("from gpurig import remote", "gpurig.remote"),
    ("from gpurig.remote import guard", "gpurig.remote"),
    ("from .. import cli", "gpurig.cli"),
    ("from ..remote.guard import check", "gpurig.remote.guard"),
    ("from . import model", "gpurig.spec.model"),
    ("importlib.import_module('gpurig.cli.main')", "gpurig.cli.main"),
    ("import_module('..onboard', package='gpurig.spec')", "gpurig.onboard"),
    ("__import__('paramiko')", "paramiko"),
]


@pytest.mark.parametrize(("line", "module"), FORMS, ids=[line for line, _ in FORMS])
def test_every_import_form_in_a_core_module_is_seen(line: str, module: str) -> None:
    """Each form added to a real core module, at its top, in a function and for the type
    checker alone, is read as that import (on import only at the top); an edge one is refused."""
    name = "gpurig.spec.model"
    text = modules()[name].read_text(encoding="utf-8")
    placed = [(f"{line}\n", True), (f"def _f():\n    {line}\n", False),
              (f"if TYPE_CHECKING:\n    {line}\n", False)]  # fmt: skip
    for added, on_import in placed:
        found = list(imports_in(f"{text}\n{added}", name))
        assert (module, on_import) in found, added
        assert (module, not on_import) not in found, added
        if wing(module) in EDGE or module in SSH_STACK:
            assert f"{name} imports {module}" in edge_imports(name, found)


def test_the_node_reaches_pyinfra_only_to_converge() -> None:
    """At module level a node module imports no edge wing but the node's own; the one
    function-level way out is up's converge."""
    wrong = []
    for name, path in modules().items():
        if wing(name) != "node":
            continue
        for imported, top in imports(path, name):
            edge = wing(imported) in ("remote", "onboard", "cli", "deploys")
            ssh = imported.split(".")[0] in SSH_STACK
            if (edge or ssh) and (top or name != "gpurig.node.up"):
                wrong.append(f"{name} imports {imported}")
    assert wrong == []


def rings(found: dict[str, set[str]]) -> list[str]:
    """Every import ring in the graph `found`, as `a -> b -> a`."""
    every = []
    for start in found:
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in found.get(node, ()):
                if nxt == start:
                    every.append(" -> ".join([*path, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    return every


def test_no_import_ring() -> None:
    """No two modules import each other, directly or in a ring, at the top or inside a function
    alike (a type checker's import counts too): a module that needs another's word takes it
    from below."""
    assert rings(graph(top_only=False)) == []


# The package's layers, lowest first (DESIGN: layout): a module imports only from its own layer
# and those below. The package's own modules (the walk, atomic writes, the record type, root's
# environment) and the data tables; the inventory model, with the records and text rules every
# layer shares (a finding, a host's report, redaction, escaping); the readers and their facts;
# the plans; the checks and the judge of a host; the formats that print it; the edge (pyinfra,
# the node contracts, onboarding, the converge's operations, the sandbox); the CLI on top.
LAYERS = [
    ("gpurig", "gpurig.fsutil", "gpurig.safe_path", "gpurig.named_tuple", "gpurig.root_env",
     "gpurig.data"),
    ("gpurig.spec",),
    ("gpurig.read", "gpurig.facts"),
    ("gpurig.plans",),
    ("gpurig.checks",),
    ("gpurig.report",),
    ("gpurig.remote", "gpurig.node", "gpurig.onboard", "gpurig.deploys", "gpurig.sandbox"),
    ("gpurig.cli", "gpurig.__main__"),
]  # fmt: skip


def layer(module: str) -> int | None:
    """The layer of `module` (its longest prefix in LAYERS), None outside the package."""
    matches = [(len(prefix), level) for level, prefixes in enumerate(LAYERS) for prefix in prefixes
               if module == prefix or module.startswith(f"{prefix}.")]  # fmt: skip
    return max(matches)[1] if matches else None


def climbs(found: dict[str, set[str]]) -> list[str]:
    """Every import in the graph `found` from a module to one of a higher layer."""
    return [f"{name} imports {d}" for name, deps in sorted(found.items()) for d in sorted(deps)
            if (layer(d) or 0) > (layer(name) or 0)]  # fmt: skip


def test_every_module_has_a_layer() -> None:
    assert [m for m in modules() if layer(m) is None] == []


def test_no_module_imports_from_a_higher_layer() -> None:
    assert climbs(graph(top_only=False)) == []


def test_a_climb_and_a_ring_are_seen() -> None:
    """The two rules above fail on what they are for: the judge importing a format, and a
    reader importing back the module that imports it (inside a function)."""
    found = graph(top_only=False)
    found["gpurig.checks.judge"] = {*found["gpurig.checks.judge"], "gpurig.report.render"}
    assert climbs(found) == ["gpurig.checks.judge imports gpurig.report.render"]
    found["gpurig.read.forked"] = {*found["gpurig.read.forked"], "gpurig.read.bounded"}
    assert "gpurig.read.bounded -> gpurig.read.forked -> gpurig.read.bounded" in rings(found)
