"""A converge interrupted on the controller exits non-zero, saying so.

pyinfra's CLI answers Ctrl-C with "Exiting upon user request!" and exit status 0, and SIGTERM
(a CI job cancelled) ends it without a word: either way the caller could take an interrupted
converge for a finished one. The process ends at once (os._exit): a SystemExit raised from a
handler lands in whichever greenlet runs, and a paramiko thread that swallows it left the run
hanging on a host's stalled upload. The hosts need nothing more: a write is placed by one host
command that finishes on its own (deploys/writes.py), and each host's lock goes with its SSH
session when the process's sockets close. Installed by inventory.py, which pyinfra loads after
setting its own handler.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType


def _interrupted(signum: int, _frame: FrameType | None) -> None:
    name = signal.Signals(signum).name
    print(f"gpurig: converge interrupted ({name}); run it again to finish", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + signum)


def install() -> None:
    """Exit 130 on SIGINT and 143 on SIGTERM (128 + the signal, as a shell reports them)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupted)
