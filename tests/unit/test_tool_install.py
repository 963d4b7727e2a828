"""The CLI installed as a tool, the two ways the docs' quick start gives: `uv tool install` and
`pipx install` of the wheelhouse scripts/wheelhouse.sh builds, with no network at all (a
network namespace of its own), HOME and the tool directories fresh. The wheelhouse is built the
repository's way (the backend pinned by hash, the locked dependencies checked against uv.lock's
hashes), pip reading those dependencies from the copy setup.sh keeps, as a site without PyPI
reads its mirror. The installed `gpurig` answers --version and validates an example inventory."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpurig.fsutil import xdg_dir

REPO_ROOT = Path(__file__).resolve().parents[2]
QUICK_START = REPO_ROOT / "docs" / "install.md"
# The commands as docs/install.md gives them, run as written from the folder holding wheels/.
WHEELHOUSE = "sh scripts/wheelhouse.sh ../wheels"
UV_TOOL = "uv tool install --no-index --find-links wheels gpurig"
PIPX = 'pipx install --pip-args="--no-index --find-links wheels" gpurig'
VENV_BIN = Path(sys.prefix, "bin")
# The machine's PATH without this venv: the tools pick the Python a user's shell would.
SYSTEM_PATH = os.pathsep.join(
    p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep) if Path(p) != VENV_BIN
)


def offline(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`command` in a network namespace with only a loopback that is down: any download fails."""
    return subprocess.run(["unshare", "--net", "sh", "-c", command], cwd=cwd, env=env,
                          capture_output=True, text=True)  # fmt: skip


def tools_bin(tmp_path: Path) -> str:
    """A PATH with this venv's uv (a dev dependency) and no venv Python before the machine's."""
    bin_dir = tmp_path / "uvbin"
    bin_dir.mkdir()
    (bin_dir / "uv").symlink_to(VENV_BIN / "uv")
    return f"{bin_dir}{os.pathsep}{SYSTEM_PATH}"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.geteuid() != 0:
        pytest.skip("needs root: the installs run in a network namespace of their own")
    lock = hashlib.sha256((REPO_ROOT / "uv.lock").read_bytes()).hexdigest()[:12]
    mirror = xdg_dir("XDG_CACHE_HOME", ".cache", f"wheelhouse-{lock}")
    assert (mirror / "requirements.txt").exists(), f"{mirror}: run `sh scripts/setup.sh`"
    top = tmp_path_factory.mktemp("site")
    env = {
        "PATH": tools_bin(top),
        "HOME": str(Path.home()),  # uv's cache holds the pinned build backend
        "UV_OFFLINE": "1",
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(mirror),
    }
    proc = offline(f"sh scripts/wheelhouse.sh {top / 'wheels'}", REPO_ROOT, env)
    assert proc.returncode == 0, proc.stderr
    assert list((top / "wheels").glob("gpurig-*.whl")), proc.stdout
    return top


def check_installed(gpurig: Path, tmp_path: Path) -> None:
    version = subprocess.run([str(gpurig), "--version"], capture_output=True, text=True)
    assert version.returncode == 0, version.stderr
    assert re.fullmatch(r"gpurig, version \S+\n", version.stdout), version.stdout
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text((REPO_ROOT / "inventories/examples/example.yaml").read_text())
    valid = subprocess.run([str(gpurig), "validate", str(fleet)], cwd=tmp_path,
                           capture_output=True, text=True)  # fmt: skip
    assert valid.returncode == 0 and valid.stdout.startswith("OK: 3 hosts"), valid.stderr
    fleet.write_text("version: 1\nhosts: {a: {address: 192.0.2.1, spec: {engine: nope}}}\n")
    invalid = subprocess.run([str(gpurig), "validate", str(fleet)], cwd=tmp_path,
                             capture_output=True, text=True)  # fmt: skip
    assert invalid.returncode == 2 and "spec.engine" in invalid.stderr


def fresh_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": tools_bin(tmp_path), "HOME": str(home), **extra}


def test_quick_start_names_the_tested_installs():
    text = QUICK_START.read_text()
    for command in (WHEELHOUSE, UV_TOOL, PIPX):
        assert command in text, f"docs/install.md does not give `{command}`"


def test_uv_tool_install_from_the_wheelhouse_offline(wheels: Path, tmp_path: Path):
    env = fresh_env(tmp_path, UV_TOOL_DIR=str(tmp_path / "tools"),
                    UV_TOOL_BIN_DIR=str(tmp_path / "bin"), UV_PYTHON_DOWNLOADS="never")  # fmt: skip
    proc = offline(UV_TOOL, wheels, env)
    assert proc.returncode == 0, proc.stderr
    check_installed(tmp_path / "bin" / "gpurig", tmp_path)


def test_pipx_install_from_the_wheelhouse_offline(wheels: Path, tmp_path: Path):
    if not shutil.which("pipx", path=SYSTEM_PATH):
        pytest.fail("pipx missing: `sh scripts/setup.sh` installs Debian's pipx")
    # pipx first upgrades its shared pip from the index, whatever --pip-args say; offline that
    # fails and the install goes on. PIP_RETRIES=0: it fails at once, not after pip's retries.
    env = fresh_env(tmp_path, PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(tmp_path / "bin"),
                    PIP_CONFIG_FILE=os.devnull, PIP_RETRIES="0")  # fmt: skip
    proc = offline(PIPX, wheels, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    check_installed(tmp_path / "bin" / "gpurig", tmp_path)
