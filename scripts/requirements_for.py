"""Keeps, of a requirements file `uv export` wrote (universal: one line per package and
marker), what installs on a node's Python VERSION (and MACHINE, `uname -m`: this one's by
default): pip reads markers for the Python and machine it runs on, and the wheelhouse is built
here for another (scripts/wheelhouse.sh DIR VERSION PLATFORM).
Usage: python scripts/requirements_for.py FILE VERSION [MACHINE] (rewrites FILE). Runs on
any python3 with pip: a checkout without .venv has only pip's own copy of `packaging`."""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from packaging.markers import Marker
except ImportError:  # the throwaway venv scripts/wheelhouse.sh makes: pip's copy
    from pip._vendor.packaging.markers import Marker


def kept(lines: list[str], version: str, machine: str | None = None) -> list[str]:
    """The lines whose requirement's marker holds on Python `version` (on `machine` where
    given), a requirement's hash lines going with it, the markers themselves dropped."""
    env = {"python_version": version, "python_full_version": f"{version}.0"}
    if machine:
        env["platform_machine"] = machine
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
    machine = sys.argv[3] if len(sys.argv) > 3 else None
    path.write_text("\n".join(kept(path.read_text().splitlines(), version, machine)) + "\n")
