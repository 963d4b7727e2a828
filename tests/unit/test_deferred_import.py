"""invoke, which paramiko imports and pyinfra replaces at once, loads only when something reads
from it (gpurig.remote.deferred): checked in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from gpurig.remote.deferred import defer
defer()
import paramiko, pyinfra.connectors.ssh
print("invoke.context" in sys.modules)
import invoke
real = hasattr(sys.modules["invoke"], "__file__")
print(callable(invoke.run), "invoke.context" in sys.modules, real)
"""


def test_invoke_loads_on_first_use_only() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "True", "True"], out.stdout + out.stderr


def test_without_the_deferral_paramiko_loads_it() -> None:
    """What the deferral saves: without it, importing paramiko loads invoke and its modules."""
    probe = "import sys, paramiko; print('invoke.context' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True"]
