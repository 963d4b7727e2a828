"""scripts/wheelhouse.sh and scripts/node_deb.sh for a target that is not this machine: CPython
3.12 on aarch64, with no network at all (a network namespace of its own), pip reading the
wheels setup.sh keeps for that target as a site reads its mirror.

A fresh copy of the checkout, with no .venv, no .tools and no uv on PATH, builds it: the script
installs uv for the account (from the uv wheel setup.sh keeps) and says so. Every wheel fits the
target by packaging's own tags, the locked dependencies for 3.12 are all there, and
requirements.txt names each wheel with its own file's sha256. The .deb carries the same wheels
and says arm64 and that Python. Where the mirror has no wheel for the target (this machine's
x86_64 cp311 ones), the script writes nothing and names every missing dependency, and only
those, with the tags it wanted."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.tags import compatible_tags, cpython_tags
from packaging.utils import canonicalize_name, parse_wheel_filename

from gpurig.fsutil import xdg_dir
from tests.unit.test_tool_install import SYSTEM_PATH, VENV_BIN, offline, tools_bin

REPO_ROOT = Path(__file__).resolve().parents[2]
SETUP = (REPO_ROOT / "scripts" / "setup.sh").read_text()
UV_VERSION = re.search(r"^UV_VERSION=(\S+)$", SETUP, re.M)[1]  # type: ignore[index]
PIPX_VERSION = re.search(r"^PIPX_VERSION=(\S+)$", SETUP, re.M)[1]  # type: ignore[index]
# What runs on CPython 3.12 on glibc 2.28 aarch64: packaging's tags, most specific first.
PLATFORMS = [f"manylinux_2_{n}_aarch64" for n in range(28, 16, -1)] + ["manylinux2014_aarch64"]
FITS = {*cpython_tags((3, 12), ["cp312"], PLATFORMS), *compatible_tags((3, 12), "cp312", PLATFORMS)}
WANTED = (
    "wanted tags: cp312-cp312, cp3N-abi3 (N <= 12) or py3-none, for manylinux_2_28_aarch64 or "
    "an older manylinux (down to manylinux_2_17_aarch64), or any platform"
)


def cache(name: str) -> Path:
    path = xdg_dir("XDG_CACHE_HOME", ".cache", name)
    assert path.is_dir(), f"{path}: run `sh scripts/setup.sh`"
    return path


def lock_hash() -> str:
    return hashlib.sha256((REPO_ROOT / "uv.lock").read_bytes()).hexdigest()[:12]


def locked_for_312() -> list[str]:
    """NAME==VERSION of every locked dependency that installs on Python 3.12, as `uv export`
    spells it (scripts/requirements_for.py's judgement, which test_python_floor holds)."""
    script = REPO_ROOT / "scripts" / "requirements_for.py"
    spec = importlib.util.spec_from_file_location("requirements_for", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    export = subprocess.run(
        [str(VENV_BIN / "uv"), "export", "--frozen", "--no-dev", "--no-emit-project", "--format",
         "requirements-txt", "--quiet"], cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    kept = module.kept(export, "3.12", "aarch64")
    return [line.split()[0] for line in kept if line and not line.startswith((" ", "#"))]


def key(requirement: str) -> tuple[str, str]:
    """NAME==VERSION as (normalised name, version)."""
    name, _, version = requirement.partition("==")
    return str(canonicalize_name(name)), version


def wheel_key(wheel: Path) -> tuple[str, str]:
    name, version, _, _ = parse_wheel_filename(wheel.name)
    return str(name), str(version)


def fits(wheel: Path) -> bool:
    return bool(set(parse_wheel_filename(wheel.name)[3]) & FITS)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkout's files as a fresh clone has them: no .venv, no .tools, nothing ignored."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the builds run in a network namespace of their own")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    ).stdout.split("\0")  # fmt: skip
    copy = tmp_path_factory.mktemp("clone") / "gpurig"
    for name in filter(None, listed):
        source = REPO_ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    return copy


def no_uv_env(top: Path, mirror: Path) -> dict[str, str]:
    """A user's environment without uv: PATH's directories holding none, a cache of its own;
    pip and uv offline, reading the mirror and uv's own wheel as a site's mirror."""
    path = os.pathsep.join(
        p for p in SYSTEM_PATH.split(os.pathsep) if p and not (Path(p) / "uv").exists()
    )
    (top / "home").mkdir()
    tools = cache(f"tools-uv{UV_VERSION}-pipx{PIPX_VERSION}")
    return {
        "PATH": path,
        "HOME": str(top / "home"),
        "XDG_CACHE_HOME": str(top / "cache"),
        "UV_CACHE_DIR": str(Path.home() / ".cache" / "uv"),  # the pinned build backend is there
        "UV_OFFLINE": "1",
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": f"{tools} {mirror}",
        "PIP_RETRIES": "0",
    }


def site_env(tmp_path: Path) -> dict[str, str]:
    """The checkout's uv on PATH, the user's caches (uv's build backend, the pip venv the
    script keeps), pip and uv offline."""
    return {"PATH": tools_bin(tmp_path), "HOME": str(Path.home()), "UV_OFFLINE": "1",
            "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_RETRIES": "0"}  # fmt: skip


def test_a_fresh_clone_without_uv_builds_an_aarch64_python312_wheelhouse_offline(
    fresh: Path, tmp_path: Path
) -> None:
    env = no_uv_env(tmp_path, cache(f"wheelhouse-{lock_hash()}-3.12-aarch64"))
    out = tmp_path / "wheels"
    proc = offline(f"sh scripts/wheelhouse.sh {out} 3.12 aarch64", fresh, env)
    assert proc.returncode == 0, proc.stderr
    home = tmp_path / "cache" / "gpurig" / f"uv-{UV_VERSION}"
    said = (
        "wheelhouse: uv not found (PATH, .venv/bin, .tools/uv/bin): installing uv "
        f"{UV_VERSION} for this account into {home}\n"
    )
    assert said in proc.stderr and (home / "bin" / "uv").is_file()
    wheels = sorted(out.glob("*.whl"))
    assert proc.stdout == (
        f"wheelhouse: {out}: {len(wheels)} wheels for CPython 3.12 on manylinux_2_28_aarch64, "
        "and requirements.txt\n"
    )
    assert [w.name for w in wheels if not fits(w)] == []
    assert any(t.platform.endswith("_aarch64") and t.abi == "cp312"
               for w in wheels for t in parse_wheel_filename(w.name)[3])  # fmt: skip
    # Every locked dependency for 3.12 and gpurig, one wheel each, listed by its own hash.
    by_key = {wheel_key(w): w for w in wheels}
    assert sorted(by_key) == sorted(key(r) for r in [*locked_for_312(), "gpurig==0.1.0"])
    lines = (out / "requirements.txt").read_text().splitlines()
    assert len(lines) == len(wheels)
    for line in lines:
        found = re.fullmatch(r"(\S+)==(\S+) --hash=sha256:([0-9a-f]{64})", line)
        assert found, line
        wheel = by_key[key(f"{found[1]}=={found[2]}")]
        assert hashlib.sha256(wheel.read_bytes()).hexdigest() == found[3], wheel.name


def test_the_node_deb_takes_the_same_target(tmp_path: Path) -> None:
    """scripts/node_deb.sh DIR 3.12 aarch64: an arm64 .deb for python3 3.12, with that
    wheelhouse inside."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the build runs in a network namespace of its own")
    env = {
        **site_env(tmp_path),
        "PIP_FIND_LINKS": str(cache(f"wheelhouse-{lock_hash()}-3.12-aarch64")),
    }
    proc = offline(f"sh scripts/node_deb.sh {tmp_path / 'debs'} 3.12 aarch64", REPO_ROOT, env)
    assert proc.returncode == 0, proc.stderr
    [deb] = (tmp_path / "debs").iterdir()
    assert deb.name == "gpurig-node_0.1.0_arm64.deb"
    control = subprocess.run(["dpkg-deb", "--field", str(deb), "Architecture", "Depends"],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "Architecture: arm64\n" in control
    assert "python3 (>= 3.12), python3 (<< 3.13)" in control
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path / "root")], check=True)
    house = tmp_path / "root" / "usr" / "share" / "gpurig" / "wheels"
    wheels = sorted(house.glob("*.whl"))
    assert wheels and [w.name for w in wheels if not fits(w)] == []
    listed = (house / "requirements.txt").read_text()
    assert len(listed.splitlines()) == len(wheels)
    for wheel in wheels:
        assert f"--hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n" in listed


def test_a_missing_wheel_is_named_with_the_tags_wanted(tmp_path: Path) -> None:
    """Given only this machine's wheels (x86_64, cp311), an aarch64 3.12 wheelhouse lacks
    exactly the compiled ones: each named NAME==VERSION, the tags wanted said, nothing written."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the build runs in a network namespace of its own")
    mirror = cache(f"wheelhouse-{lock_hash()}")
    env = {**site_env(tmp_path), "PIP_FIND_LINKS": str(mirror)}
    out = tmp_path / "wheels"
    proc = offline(f"sh scripts/wheelhouse.sh {out} 3.12 aarch64", REPO_ROOT, env)
    assert proc.returncode == 1, proc.stderr
    compiled = {wheel_key(w) for w in mirror.glob("*.whl") if not fits(w)}
    locked = locked_for_312()
    missing = [r for r in locked if key(r) in compiled]
    assert missing and len(missing) < len(locked)
    assert proc.stderr.endswith(
        "wheelhouse: no wheel for CPython 3.12 on manylinux_2_28_aarch64 for "
        f"{len(missing)} of {len(locked)} locked dependencies:\n"
        + "".join(f"  {r}\n" for r in missing)
        + f"{WANTED}\n"
        "Add them to the index or find-links pip reads here (pip's config, PIP_FIND_LINKS).\n"
    )
    assert list(out.iterdir()) == []
