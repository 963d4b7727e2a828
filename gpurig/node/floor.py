"""The Python each part of gpurig needs. The node agent (the node contracts of
`drift --local`: Prolog, HealthCheckProgram, NPD, textfile) runs on the node's own python3
from pyproject's requires-python (Debian 11 and RHEL 9 ship 3.9); what loads pyinfra, gevent
or click (the converge, drift over SSH, `up --local`, every other command) needs FULL_PYTHON,
and its dependencies install only there (pyproject's markers). gpurig/data/releases.yaml
names both for onboarding; tests/unit/test_python_floor.py holds the three equal."""

from __future__ import annotations

import sys

FULL_PYTHON = (3, 11)


class BelowFloor(SystemExit):
    """A command this interpreter cannot run: one line on stderr, exit status 1."""


def need_full(what: str) -> None:
    """Refuse `what`, naming its floor, where this interpreter runs only the node agent."""
    if sys.version_info[:2] >= FULL_PYTHON:
        return
    have = ".".join(map(str, sys.version_info[:2]))
    need = ".".join(map(str, FULL_PYTHON))
    print(f"gpurig: {what} needs Python {need} or newer; this is Python {have}, where gpurig "
          "runs only the node contracts (drift --local)", file=sys.stderr)  # fmt: skip
    raise BelowFloor(1)
