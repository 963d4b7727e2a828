"""The wheel is the product: `uv build` (offline, from uv's cache) carries everything `gpurig`
imports and reads under the one top-level name `gpurig` (the deploy tree as gpurig/_deploy/),
and a fresh venv outside the checkout runs `gpurig validate`, `gpurig drift --help` and the
converge's pyinfra entry (`inventory.py`, `deploys/gpu_host.py`) with it. The dependencies come
from this environment's site-packages through a plain path (.pth line): its editable install's
own .pth, which would put the checkout on sys.path, is not processed that way."""

from __future__ import annotations

import ast
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from gpurig import DEPLOY_ROOT, deploys, facts

REPO_ROOT = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).parent / "uv"
CARRIED = [
    "gpurig/cli/main.py",
    "gpurig/data/",
    "gpurig/_deploy/deploys/gpu_host.py",
    "gpurig/_deploy/facts/gpurig_node.py",
    "gpurig/_deploy/facts/env_imports.sh",
    "gpurig/_deploy/facts/git_changes.sh",
    "gpurig/_deploy/schemas/inventory.schema.json",
    "gpurig/_deploy/inventory.py",
]
# Every import of the converge's deploy file resolves where the wheel installed it (the file
# itself runs only inside pyinfra's deploy context).
DEPLOY_IMPORTS = """
import ast, importlib.util, sys
from gpurig.remote.converge import DEPLOY_ROOT
tree = ast.parse((DEPLOY_ROOT / "deploys" / "gpu_host.py").read_text())
names = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
missing = [name for name in names if importlib.util.find_spec(name) is None]
print(DEPLOY_ROOT, len(names), missing)
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not UV.exists():
        pytest.fail(f"{UV} missing: run `uv sync --frozen` (uv is a dev dependency)")
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [str(UV), "build", "--wheel", "--offline", "--quiet", "-o", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "UV_PYTHON_DOWNLOADS": "never"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (built,) = out.glob("gpurig-*.whl")
    return built


def test_wheel_carries_every_part_the_cli_imports_or_reads(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    for part in CARRIED:
        assert any(n.startswith(part) for n in names), f"{part} is not in {wheel.name}"
    assert {n.split("/")[0] for n in names} == {"gpurig", "gpurig-0.1.0.dist-info"}
    assert not [n for n in names if "__pycache__" in n]


def test_installed_wheel_runs_outside_the_checkout(wheel: Path, tmp_path: Path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    proc = subprocess.run(
        [str(UV), "pip", "install", "--offline", "--no-deps", "--quiet", "--python", str(python),
         str(wheel)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp_path / "elsewhere"
    work.mkdir()
    inventory = work / "fleet.yaml"
    inventory.write_text((REPO_ROOT / "inventories/examples/example.yaml").read_text())

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*args], cwd=work, capture_output=True, text=True)

    assert sorted(p.name for p in Path(site).iterdir()) == [
        "deps.pth",
        "gpurig",
        "gpurig-0.1.0.dist-info",
    ]
    imports = (
        "import gpurig.facts.gpurig_node, gpurig.deploys.containers, gpurig.checks.judge,"
        " gpurig.facts;"
        " print(gpurig.facts.__file__)"
    )
    where = run(str(python), "-c", imports)
    assert where.stdout.startswith(f"{site}/gpurig/_deploy/facts/"), where.stdout + where.stderr
    deploy = run(str(python), "-c", DEPLOY_IMPORTS)
    assert deploy.stdout.split() == [f"{site}/gpurig/_deploy", deploy.stdout.split()[1], "[]"]
    assert int(deploy.stdout.split()[1]) > 10, deploy.stdout + deploy.stderr
    # The converge's inventory file, run by pyinfra where the converge runs it (DEPLOY_ROOT).
    listed = subprocess.run(
        [str(python), "-m", "pyinfra", "inventory.py", "debug-inventory"],
        cwd=f"{site}/gpurig/_deploy", capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPURIG_INVENTORY": str(inventory)},
    )  # fmt: skip
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "a100-1" in listed.stderr  # pyinfra prints the inventory on stderr
    valid = run(str(venv / "bin" / "gpurig"), "validate", str(inventory))
    assert valid.returncode == 0, valid.stderr
    assert valid.stdout.startswith("OK: ")
    inventory.write_text("version: 1\nhosts: {a: {address: 192.0.2.1, spec: {engine: nope}}}\n")
    invalid = run(str(venv / "bin" / "gpurig"), "validate", str(inventory))
    assert invalid.returncode == 2 and "spec.engine" in invalid.stderr
    helped = run(str(venv / "bin" / "gpurig"), "drift", "--help")
    assert helped.returncode == 0 and "--format" in helped.stdout


def test_the_checkout_imports_its_deploy_tree_under_gpurig_only():
    """`facts` and `deploys` are importable as top-level names in a checkout (pyinfra and
    pytest put it on sys.path), but a module imported under both names is two modules with two
    sets of facts: everything imports `gpurig.facts` and `gpurig.deploys`, which in a checkout
    are the top-level directories."""
    assert Path(DEPLOY_ROOT) == REPO_ROOT
    assert Path(facts.__file__) == REPO_ROOT / "facts" / "__init__.py"
    assert Path(deploys.__file__) == REPO_ROOT / "deploys" / "__init__.py"
    sources = [REPO_ROOT / "inventory.py"]
    for top in ["gpurig", "facts", "deploys", "tests", "benchmarks", "scripts", "examples"]:
        sources += sorted((REPO_ROOT / top).rglob("*.py"))
    offenders = []
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            offenders += [
                f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {name}"
                for name in names
                if name.split(".")[0] in ("facts", "deploys")
            ]
    assert offenders == []
