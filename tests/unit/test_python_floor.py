"""The node agent's floor: every module a node contract can import, computed from the imports
of the console script (not a hand list), parses and runs on Python 3.9. What lies behind
gpurig.node.floor.need_full (the CLI's other commands, `up --local`) is not followed: on 3.9 it
refuses first. Syntax comes from ruff's own parser at `--target-version py39` (match,
`except*`, f-strings reusing their quotes, `type` aliases) with FA102 (a PEP 604 annotation
evaluated without `from __future__ import annotations`); ruff does not see what 3.9's runtime
lacks, so the rest is read here from the tree. The real interpreter runs them on the release
matrix's Debian 11 host (tests/integration/test_node_py39.py)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

import gpurig
from gpurig.data.tables import table
from gpurig.node.floor import FULL_PYTHON

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "gpurig.cli.entry"  # the console script: node contracts first, then the floor
GATE = "need_full"
# The standard library and typing names 3.9 does not have, by where they are imported from.
NEWER_NAMES = {
    "typing": {"TypeAlias", "ParamSpec", "Concatenate", "TypeGuard", "Self", "Never",
               "LiteralString", "assert_never", "assert_type", "reveal_type", "Required",
               "NotRequired", "Unpack", "TypeVarTuple", "dataclass_transform", "override",
               "TypeIs", "ReadOnly", "get_overloads", "clear_overloads"},
    "itertools": {"pairwise", "batched"},
    "contextlib": {"aclosing", "chdir"},
    "dataclasses": {"KW_ONLY"},
    "enum": {"StrEnum", "verify", "member", "nonmember", "global_enum", "ReprEnum"},
    "datetime": {"UTC"},
    "hashlib": {"file_digest"},
    "operator": {"call"},
    "os": {"unshare", "setns", "eventfd", "login_tty", "splice"},
}  # fmt: skip
NEWER_MODULES = {"tomllib", "wsgiref.types"}
NEWER_BUILTINS = {"aiter", "anext", "ExceptionGroup", "BaseExceptionGroup", "EncodingWarning"}
NEWER_METHODS = {"bit_count"}  # int.bit_count (3.10)
# Keyword arguments 3.9's callables refuse, by the callable's last name.
NEWER_KEYWORDS = {
    "zip": {"strict"},
    "dataclass": {"slots", "kw_only", "match_args", "weakref_slot"},
    "field": {"kw_only"},
    "run": {"process_group", "pipesize"},
    "Popen": {"process_group", "pipesize"},
    "TemporaryDirectory": {"ignore_cleanup_errors", "delete"},
    "rmtree": {"onexc"},
    "glob": {"root_dir", "dir_fd", "include_hidden"},
    "bisect": {"key"},
    "bisect_left": {"key"},
    "bisect_right": {"key"},
    "insort": {"key"},
}
TYPES = {"int", "str", "bytes", "float", "bool", "dict", "list", "tuple", "set", "frozenset",
         "type", "object", "Path"}  # fmt: skip


def module_file(name: str) -> Path | None:
    """The source of gpurig module `name`, in the checkout's layout (gpurig.__path__ holds the
    deploy tree beside the package), or None where `name` is not a module (an imported name)."""
    parts = name.split(".")[1:]
    for base in map(Path, gpurig.__path__):
        stem = base.joinpath(*parts)
        for path in (stem.with_suffix(".py"), stem / "__init__.py"):
            if parts and path.is_file():
                return path
    return Path(gpurig.__file__) if not parts else None


def _imports(body: list[ast.stmt], package: str) -> list[str]:
    """Module names `body` imports at run time: not under `if TYPE_CHECKING:`, and in a
    function not after its floor gate (what follows the gate never runs below the floor)."""
    found: list[str] = []
    for node in body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            if getattr(func, "id", getattr(func, "attr", None)) == GATE:
                break
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found += _imports(node.orelse, package)
            continue
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            found += [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.AST):
                found += _imports(inner, package)  # type: ignore[arg-type]
    return found


def node_closure() -> tuple[dict[str, Path], set[str]]:
    """Every gpurig module the console script can import below the floor, with its file, and
    the top-level names of what else those modules import."""
    modules: dict[str, Path] = {}
    outside: set[str] = set()
    todo = [ENTRY]
    while todo:
        name = todo.pop()
        path = None if name in modules else module_file(name)
        if path is None:
            continue
        modules[name] = path
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for imported in _imports(ast.parse(path.read_text()).body, package):
            if imported.split(".")[0] == "gpurig":
                todo.append(imported)
            else:
                outside.add(imported.split(".")[0])
    return modules, outside


def newer_than_39(tree: ast.AST) -> list[str]:
    """What in `tree` Python 3.9 lacks at run time, as `line: what`."""
    found: list[str] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.ImportFrom) and node.module in NEWER_NAMES:
            found += [f"{line}: {node.module}.{a.name}" for a in node.names
                      if a.name in NEWER_NAMES[node.module]]  # fmt: skip
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            found += [f"{line}: import {n}" for n in names if n in NEWER_MODULES]
        if isinstance(node, ast.Attribute):
            owner = getattr(node.value, "id", None)
            if node.attr in NEWER_NAMES.get(owner or "", ()) or node.attr in NEWER_METHODS:
                found.append(f"{line}: {ast.unparse(node)}")
        if isinstance(node, ast.Name) and node.id in NEWER_BUILTINS:
            found.append(f"{line}: {node.id}")
        if isinstance(node, ast.Call):
            callee = getattr(node.func, "id", getattr(node.func, "attr", ""))
            found += [f"{line}: {callee}({k.arg}=)" for k in node.keywords
                      if k.arg in NEWER_KEYWORDS.get(callee, ())]  # fmt: skip
            union = len(node.args) == 2 and isinstance(getattr(node.args[1], "op", None), ast.BitOr)
            if callee in {"isinstance", "issubclass"} and union:
                found.append(f"{line}: {callee} with a union type")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) and _is_type(node):
            found.append(f"{line}: {ast.unparse(node)} evaluated at run time")
    return found


def _is_type(union: ast.BinOp) -> bool:
    """Whether a `|` outside any annotation joins types: None, a subscripted generic or a
    built-in type on either side (flags like os.O_RDONLY | os.O_NOFOLLOW are not types)."""
    sides = [union.left, union.right]
    return any((isinstance(s, ast.Constant) and s.value is None) or isinstance(s, ast.Subscript)
               or (isinstance(s, ast.Name) and s.id in TYPES) for s in sides)  # fmt: skip


def _strip_annotations(tree: ast.Module) -> ast.Module:
    """The tree without annotations: with `from __future__ import annotations` they are never
    evaluated (FA102 covers a module without it)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
            for arg in [*node.args.args, *node.args.posonlyargs, *node.args.kwonlyargs,
                        node.args.vararg, node.args.kwarg]:  # fmt: skip
                if arg is not None:
                    arg.annotation = None
        if isinstance(node, ast.AnnAssign):
            node.annotation = ast.Constant(value="")
    return tree


def ruff_py39(paths: list[Path]) -> list[str]:
    """ruff's findings at --target-version py39: syntax 3.9 cannot parse, and FA102."""
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ruff"), "check", "--isolated", "--target-version",
         "py39", "--select", "FA102", "--output-format", "concise", "--quiet", *map(str, paths)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    return [line for line in proc.stdout.splitlines() if line.strip()]


def test_the_node_closure_is_the_node_path_and_not_the_rest() -> None:
    """The computed closure holds what the contracts run (the judge, the local reader, the
    textfile, the SLURM drain) and none of what the floor keeps out."""
    modules, _ = node_closure()
    assert {"gpurig.node.run", "gpurig.node.slurm", "gpurig.checks.judge", "gpurig.read.local",
            "gpurig.report.textfile", "gpurig.facts.round_trip", "gpurig.spec.inventory",
            "gpurig.safe_path", "gpurig.fsutil", "gpurig.node.floor"} <= set(modules)  # fmt: skip
    assert not {"gpurig.cli.main", "gpurig.node.up", "gpurig.remote.cooperative"} & set(modules)


def test_the_node_closure_parses_as_python_39() -> None:
    modules, _ = node_closure()
    assert ruff_py39(sorted(modules.values())) == []


def test_the_node_closure_uses_nothing_python_39_lacks() -> None:
    modules, _ = node_closure()
    found = {name: newer_than_39(_strip_annotations(ast.parse(path.read_text())))
             for name, path in modules.items()}  # fmt: skip
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_the_node_closure_imports_only_what_installs_on_python_39() -> None:
    """Outside the standard library, the closure imports only dependencies pyproject installs
    on every Python it accepts (no marker), so a 3.9 node has each."""
    _, outside = node_closure()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    everywhere = {dep.split(";")[0].split(">")[0].split("<")[0].split("=")[0].strip().lower()
                  for dep in pyproject["project"]["dependencies"] if ";" not in dep}  # fmt: skip
    distributions = packages_distributions()
    # _sha2: the standard library's SHA-256 from Python 3.12 (gpurig.spec.digest; _sha256 before).
    third = outside - set(sys.stdlib_module_names) - {"__future__", "_sha2"}
    installed_by = {top: {d.lower().replace("_", "-") for d in distributions.get(top, [top])}
                    for top in third}  # fmt: skip
    everywhere = {d.replace("_", "-").replace(".", "-") for d in everywhere}
    assert {top for top, dists in installed_by.items()
            if not {d.replace(".", "-") for d in dists} & everywhere} == set()  # fmt: skip
    # A spec is parsed by PyYAML's events (gpurig.spec.safe_yaml); ruamel is pin's alone.
    assert "yaml" in third and "ruamel" not in third


@pytest.mark.parametrize(
    "source",
    [
        "match x:\n    case 1:\n        pass\n",
        "def f(x: int | None) -> None:\n    pass\n",
        'x = f"{y["a"]}"\n',
    ],
    ids=["match", "annotation-union", "f-string-quotes"],
)
def test_ruff_sees_what_39_cannot_parse(source: str, tmp_path: Path) -> None:
    path = tmp_path / "newer.py"
    path.write_text(source)
    assert ruff_py39([path]) != []


@pytest.mark.parametrize(
    "source",
    [
        "import itertools\nitertools.pairwise([1, 2])\n",
        "from typing import TypeAlias\n",
        "zip([1], [2], strict=True)\n",
        "from dataclasses import dataclass\n@dataclass(slots=True)\nclass A:\n    x: int\n",
        "isinstance(1, int | str)\n",
        "Alias = dict[str, int] | None\n",
        "(5).bit_count()\n",
        "import tomllib\n",
    ],
)
def test_the_tree_reading_sees_what_39_lacks(source: str) -> None:
    assert newer_than_39(_strip_annotations(ast.parse(source))) != []


def test_flags_and_annotations_pass() -> None:
    source = "import os\nflags = os.O_RDONLY | os.O_NOFOLLOW\nx: int | None = None\n"
    assert newer_than_39(_strip_annotations(ast.parse(source))) == []


def test_the_floors_agree() -> None:
    """pyproject accepts the node agent's floor, releases.yaml names both, and the markers
    keep the full install's dependencies to FULL_PYTHON."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    releases = table("releases.yaml")
    full = ".".join(map(str, FULL_PYTHON))
    assert pyproject["project"]["requires-python"] == f">={releases['node_python']}"
    assert releases["full_python"] == full
    marked = [dep for dep in pyproject["project"]["dependencies"] if ";" in dep]
    assert marked and all(dep.endswith(f"python_version >= '{full}'") for dep in marked)
    assert {"pyinfra", "gevent", "paramiko", "click"} <= {d.split(">")[0] for d in marked}


# The console script under a floor above this interpreter: what a 3.9 node meets.
BELOW = """
import json, sys
import gpurig.node.floor
gpurig.node.floor.FULL_PYTHON = (99, 0)
sys.argv = ["gpurig", *json.loads(sys.argv[1])]
from gpurig.cli.entry import main
main()
"""


@pytest.mark.parametrize(
    ("args", "refused"),
    [
        (["validate", "inventories/examples/example.yaml"], "gpurig validate"),
        (["drift", "inventories/examples/example.yaml"], "gpurig drift"),
        (["up", "--local", "--spec", "SPEC"], "gpurig up --local"),
        (["drift", "--local", "--spec", "SPEC", "--mode", "npd"], None),
    ],
    ids=["validate", "drift-over-ssh", "up-local", "npd"],
)
def test_below_the_full_floor_only_the_node_contracts_run(
    args: list[str], refused: str | None, tmp_path: Path
) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text("engine: none\nscope: user\nchecks: {disk_free_min: 1m}\n")
    argv = [str(spec) if a == "SPEC" else a for a in args]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT),
           "GPURIG_RUNTIME_DIR": str(tmp_path / "run")}  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", BELOW, json.dumps(argv)], cwd=ROOT, env=env,
                          capture_output=True, text=True)  # fmt: skip
    if refused is None:
        # judged: NPD's one line with its status (this machine's state decides which)
        assert proc.returncode in (0, 1) and len(proc.stdout.splitlines()) == 1, proc.stderr
        assert "needs Python" not in proc.stderr
        return
    assert proc.returncode == 1 and proc.stdout == ""
    here = ".".join(map(str, sys.version_info[:2]))
    said = f"gpurig: {refused} needs Python 99.0 or newer; this is Python {here}, where gpurig"
    assert proc.stderr == f"{said} runs only the node contracts (drift --local)\n"


def test_the_wheelhouse_keeps_what_installs_on_the_nodes_python() -> None:
    """scripts/requirements_for.py on the lock's own export: for 3.9, the node agent's
    dependencies (jsonschema at its 3.9 version), markers dropped, hashes kept; for 3.11, the
    full install's."""
    script = ROOT / "scripts" / "requirements_for.py"
    spec = importlib.util.spec_from_file_location("requirements_for", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # uv as the user has it, else where setup.sh put it (as scripts/wheelhouse.sh finds it)
    uv = shutil.which("uv", path=f"{os.environ.get('PATH', '')}:{ROOT / '.tools' / 'uv' / 'bin'}")
    assert uv is not None
    export = subprocess.run(
        [str(uv), "export", "--frozen", "--no-dev", "--no-emit-project", "--format",
         "requirements-txt", "--quiet"], cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    for version, wanted, unwanted in (("3.9", "jsonschema==4.25.1", "pyinfra=="),
                                      ("3.11", "pyinfra==", "jsonschema==4.25.1")):  # fmt: skip
        lines = module.kept(export, version)
        named = [line for line in lines if line and not line.startswith((" ", "#"))]
        assert any(line.startswith(wanted) for line in named)
        assert not any(line.startswith(unwanted) for line in named)
        assert all(" ; " not in line for line in named)
        assert sum("--hash=sha256:" in line for line in lines) >= len(named)
