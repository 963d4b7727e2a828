"""The install page (docs/install.md) run as a reader would: every command of its shell
blocks, block by block in a fresh folder and HOME, with no network at all (a network namespace
of its own) and no root needed by any of them. The repository's address is a clone of this
one; PyPI is the mirror setup.sh keeps (the locked wheels, the build backend's), given the way
a site points uv and pip at its mirror. A line marked `# or this` is run instead of the line
before it, as another way."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

import pytest

from gpurig.fsutil import xdg_dir
from tests.unit.test_tool_install import offline, tools_bin

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGE = REPO_ROOT / "docs" / "install.md"
BLOCK = re.compile(r"^```sh\n(?P<body>.*?)^```$", re.M | re.S)
ALTERNATIVE = "# or this"


def blocks() -> list[list[str]]:
    """Each shell block of the page as its command lines (comments kept: they mark the
    alternatives)."""
    text = PAGE.read_text()
    return [[line for line in m["body"].splitlines() if line.strip()] for m in BLOCK.finditer(text)]


def ways(lines: list[str]) -> list[list[str]]:
    """A block's ways: as written without its alternatives, then each alternative in place of
    the line before it."""
    plain = [line for line in lines if ALTERNATIVE not in line]
    ways = [plain]
    for index, line in enumerate(lines):
        if ALTERNATIVE in line:
            before = [x for x in lines[: index - 1] if ALTERNATIVE not in x]
            after = [x for x in lines[index + 1 :] if ALTERNATIVE not in x]
            ways.append([*before, line, *after])
    return ways


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What the page's commands find around them: the repository's address (a clone of this
    one) and the mirror, as environment settings a site uses."""
    if os.geteuid() != 0:
        pytest.skip("needs root: each block runs in a network namespace of its own")
    lock = hashlib.sha256((REPO_ROOT / "uv.lock").read_bytes()).hexdigest()[:12]
    build = hashlib.sha256((REPO_ROOT / "scripts/build-constraints.txt").read_bytes())
    mirrors = [xdg_dir("XDG_CACHE_HOME", ".cache", f"wheelhouse-{lock}"),
               xdg_dir("XDG_CACHE_HOME", ".cache", f"build-{build.hexdigest()[:12]}")]  # fmt: skip
    for mirror in mirrors:
        assert mirror.is_dir(), f"{mirror}: run `sh scripts/setup.sh`"
    top = tmp_path_factory.mktemp("install")
    repo = top / "repository"
    subprocess.run(["git", "clone", "-q", str(REPO_ROOT), str(repo)], check=True)
    links = " ".join(str(m) for m in mirrors)
    return {
        "url": f"file://localhost{repo}",  # a host part: pipx reads a URL only with one
        "PATH": tools_bin(top),
        "UV_CACHE_DIR": str(Path.home() / ".cache" / "uv"),  # the cache setup.sh's uv filled
        "UV_OFFLINE": "1",
        "UV_FIND_LINKS": links.replace(" ", ","),
        "UV_PYTHON_DOWNLOADS": "never",
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": links,
        "PIP_RETRIES": "0",
    }


def run_way(lines: list[str], site: dict[str, str], tmp_path: Path) -> str:
    home = tmp_path / "home"
    home.mkdir()
    bin_dir = home / ".local" / "bin"
    env = {key: value for key, value in site.items() if key != "url"}
    env.update(HOME=str(home), PATH=f"{bin_dir}{os.pathsep}{site['PATH']}",
               UV_TOOL_DIR=str(home / "tools"), UV_TOOL_BIN_DIR=str(bin_dir),
               PIPX_HOME=str(home / "pipx"), PIPX_BIN_DIR=str(bin_dir))  # fmt: skip
    script = "\n".join(lines).replace("REPOSITORY-URL", site["url"])
    done = offline(f"set -eu\n{script}", tmp_path, env)
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_page_says_no_root() -> None:
    text = PAGE.read_text()
    commands = [line for block in blocks() for line in block if not line.startswith("#")]
    assert commands and not [c for c in commands if re.search(r"\b(sudo|apt-get|apt|su)\b", c)]
    assert "no root" in text


def test_every_block_of_the_install_page_runs(site: dict[str, str], tmp_path: Path) -> None:
    """Each way in turn, each in a fresh folder and HOME: whatever it installs answers
    `gpurig --version` from the PATH the page gives (the tools' ~/.local/bin)."""
    found = blocks()
    assert len(found) >= 6, "the page's blocks moved: look at this test's steps"
    # A block that only checks the install runs after each installing one.
    check = [line for block in found for line in block if line == "gpurig --version"]
    installing = [block for block in found if block != ["gpurig --version"]]
    ran = 0
    for number, block in enumerate(installing):
        for way_number, way in enumerate(ways(block)):
            place = tmp_path / f"{number}-{way_number}"
            place.mkdir()
            steps = way
            if way[0].startswith("cd gpurig"):  # a block that starts in the clone made above
                steps = ["git clone -q REPOSITORY-URL gpurig", *way]
            installs = any(" install " in line for line in way)
            said = run_way([*steps, *(check if installs else [])], site, place)
            assert re.search(r"gpurig, version \S+", said), said
            ran += 1
    assert ran >= 7  # git URL (uv, pipx), checkout, wheel, wheelhouse (uv, pipx), fleet checkout
