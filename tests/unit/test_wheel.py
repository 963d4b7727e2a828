"""The wheel is the product: `uv build` (offline, from uv's cache) carries everything `gpurig`
imports and reads, and a fresh venv outside the checkout runs `gpurig validate` and
`gpurig drift --help` with it. The dependencies come from this environment's site-packages
through a plain path (.pth line): its editable install's own .pth, which would put the
checkout on sys.path, is not processed that way."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).parent / "uv"
CARRIED = [
    "gpurig/cli.py",
    "gpurig/data/",
    "deploys/gpu_host.py",
    "facts/gpurig_node.py",
    "facts/env_imports.sh",
    "facts/git_changes.sh",
    "schemas/inventory.schema.json",
    "inventory.py",
]


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
    assert not [n for n in names if n.startswith(("tests/", "scripts/", "benchmarks/"))]


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

    imports = "import facts.gpurig_node, deploys.containers, gpurig.drift; print(facts.__file__)"
    where = run(str(python), "-c", imports)
    assert where.stdout.startswith(site), where.stdout + where.stderr
    valid = run(str(venv / "bin" / "gpurig"), "validate", str(inventory))
    assert valid.returncode == 0, valid.stderr
    assert valid.stdout.startswith("OK: ")
    inventory.write_text("version: 1\nhosts: {a: {address: 192.0.2.1, spec: {engine: nope}}}\n")
    invalid = run(str(venv / "bin" / "gpurig"), "validate", str(inventory))
    assert invalid.returncode == 2 and "spec.engine" in invalid.stderr
    helped = run(str(venv / "bin" / "gpurig"), "drift", "--help")
    assert helped.returncode == 0 and "--format" in helped.stdout
