"""A tiny lockfile-managed Python project built offline: two pure wheels written by hand in a
local `wheels/` directory, a virtual uv project locked against it, and a pip requirements file
with hashes. Unit tests install it here; integration tests commit it to a sandbox git repo."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import zipfile
from pathlib import Path


def make_wheel(directory: Path, name: str, version: str) -> Path:
    """A minimal valid pure-Python wheel whose module reports its version."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f'__version__ = "{version}"\n',
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: gpurig-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(zipfile.ZipInfo(path, (2020, 1, 1, 0, 0, 0)), text)
    return wheel


def make_project(
    root: Path, pins: dict[str, str], wheels: dict[str, list[str]], find_links: str = ""
) -> None:
    """`root` as a uv project needing `pins` (name -> version), locked offline against
    `root/wheels` (holding `wheels`: name -> versions), plus `requirements.txt` with hashes
    whose wheels pip finds in `find_links` (where the checkout will be; default `root/wheels`).
    """
    (root / "wheels").mkdir(parents=True, exist_ok=True)
    for name, versions in wheels.items():
        for version in versions:
            make_wheel(root / "wheels", name, version)
    deps = ", ".join(f'"{name}=={version}"' for name, version in pins.items())
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "proj"\nversion = "0"\nrequires-python = ">=3.9"\n'
        f"dependencies = [{deps}]\n\n"
        '[tool.uv]\npackage = false\nno-index = true\nfind-links = ["wheels"]\n'
    )
    subprocess.run(["uv", "lock", "--offline", "--quiet"], cwd=root, check=True)
    lines = ["--no-index", f"--find-links {find_links or root / 'wheels'}"]
    for name, version in pins.items():
        wheel = root / "wheels" / f"{name}-{version}-py3-none-any.whl"
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{digest}")
    (root / "requirements.txt").write_text("\n".join(lines) + "\n")
