"""A node contract's read started before its checks are loaded: the read (a shell script of
about 40 ms) and gpurig's import of its checks and plans (about 60 ms) then run side by side
rather than one after the other, which is most of what a contract costs beside NHC (issue 28).

The command is the one this spec's contract ran last time, kept in the account's runtime
directory (gpurig.spec.runtime: the account's own, trusted as bytecode is). It is only a
guess: once the checks are loaded the command is built again, and the started read is used
only when it is that command; otherwise it is stopped and the right one run. A spec whose
command differs from run to run is marked so, and read ahead no more."""

from __future__ import annotations

import hashlib
import marshal
import os
import subprocess
import time
from typing import Any

from gpurig import __version__
from gpurig.data.tables import table
from gpurig.read.local import start, stop
from gpurig.spec import runtime
from gpurig.spec.user_scope import is_user

# What is kept for a spec whose command differs from run to run (one with a fresh key in it).
VARIES = "varies"


class Ahead:
    """The read started for contract `mode` of `spec`, if a command was kept for it."""

    def __init__(self, spec: dict[str, Any], mode: str) -> None:
        self.name: str | None = None
        self.kept: Any = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.deadline = 0.0
        # As root no sudo is asked, and a user-scope spec reads as the user: only then is the
        # command known before gpurig's checks are (another account's read asks `sudo -n`).
        if os.geteuid() != 0 and not is_user(spec):
            return
        try:
            shape = marshal.dumps((__version__, mode, os.geteuid(), spec))
        except ValueError:
            return
        self.name = f"read.{hashlib.sha256(shape).hexdigest()[:32]}"
        self.kept = runtime.kept(self.name)
        if isinstance(self.kept, list) and all(isinstance(arg, str) for arg in self.kept):
            seconds = table("node_modes.yaml")["modes"][mode]["read_seconds"]
            self.deadline = time.monotonic() + seconds
            self.proc = start(self.kept)

    def take(self, argv: list[str]) -> tuple[subprocess.Popen[bytes], float] | None:
        """The started read, where it is `argv`; else None (it is stopped, and what to start
        next time kept)."""
        if self.proc is not None and argv == self.kept:
            return self.proc, self.deadline
        if self.proc is not None:
            stop(self.proc)
        if self.name is not None and self.kept != VARIES:
            runtime.keep(self.name, VARIES if self.proc is not None else argv, "read.*")
        return None
