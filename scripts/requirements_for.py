"""Keeps, of a requirements file `uv export` wrote (universal: one line per package and
marker), what installs on a node's Python VERSION: pip reads markers for the Python it runs
on, and the wheelhouse is built here for another (scripts/wheelhouse.sh DIR VERSION).
Usage: python scripts/requirements_for.py FILE VERSION (rewrites FILE)."""

from __future__ import annotations

import sys
from pathlib import Path

from packaging.markers import Marker


def kept(lines: list[str], version: str) -> list[str]:
    """The lines whose requirement's marker holds on Python `version` (a requirement's hash
    lines go with it), the markers themselves dropped."""
    env = {"python_version": version, "python_full_version": f"{version}.0"}
    out, keep = [], True
    for line in lines:
        if line and not line.startswith((" ", "#")):
            name, _, marker = line.rstrip(" \\").partition(" ; ")
            keep = not marker or Marker(marker).evaluate(env)
            if keep and marker:  # held here; pip would judge it by its own Python
                line = f"{name} \\" if line.endswith("\\") else name
        if keep:
            out.append(line)
    return out


if __name__ == "__main__":
    path, version = Path(sys.argv[1]), sys.argv[2]
    path.write_text("\n".join(kept(path.read_text().splitlines(), version)) + "\n")
