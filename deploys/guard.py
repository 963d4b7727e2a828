"""Fail a host's run with a clear reason: pyinfra has no operation for "refuse"."""

from __future__ import annotations

import shlex

from pyinfra.api import operation


@operation(is_idempotent=False)
def refuse(reason: str):
    """Print `reason` on the host's stderr and fail; nothing else runs there afterwards."""
    yield f"echo {shlex.quote('gpurig: ' + reason)} >&2; exit 1"
