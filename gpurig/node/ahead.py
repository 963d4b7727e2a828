"""A node contract's read started before gpurig's checks are loaded: the read (a shell script of
about 40 ms) and the import of the checks and plans (about 60 ms) then run side by side rather
than one after the other, which was most of what a contract cost beside NHC
(benchmarks/node_contracts.py). Before the read starts nothing is loaded that the contract
could load beside it (subprocess, typing, pathlib, re: tests/unit/test_read_forked.py): the
read is forked from `os` (gpurig.read.forked), the kept command found with `os` alone.

The command is the one this contract ran last time for the same spec file's text, kept in the
account's runtime directory (gpurig.spec.runtime: the account's own, trusted as bytecode is).
It is only a guess: once the checks are loaded the command is built again, and the started read
is used only when it is that command; otherwise it is stopped and the right one run. A spec
whose command differs from run to run is marked so, and read ahead no more."""

from __future__ import annotations

import os
import time

from gpurig.read.forked import launch
from gpurig.spec import runtime

TYPE_CHECKING = False  # typing itself is not loaded before the read starts
if TYPE_CHECKING:
    from gpurig.read.forked import Started

# What is kept for a spec whose command differs from run to run (one with a fresh key in it).
VARIES = "varies"


class Ahead:
    """The read started for contract `mode` (or `up`) of host `as_host` in the file whose
    bytes are `source` (a spec file, or an inventory), if a command was kept for them; bounded
    by the mode's read time, or `seconds`."""

    def __init__(
        self, source: bytes, as_host: str | None, mode: str, seconds: float | None = None
    ) -> None:
        self.name = runtime.named("read", mode, str(os.geteuid()), str(as_host), source)
        self.kept: object = runtime.kept(self.name)
        self.proc: Started | None = None
        self.deadline = 0.0
        if isinstance(self.kept, list) and self.kept and all(isinstance(a, str) for a in self.kept):
            if seconds is None:
                from gpurig.data.tables import table

                seconds = table("node_modes.yaml")["modes"][mode]["read_seconds"]
            self.deadline = time.monotonic() + seconds
            try:
                self.proc = launch(self.kept)
            except OSError:  # gone since (a sudo removed): the command built now is run
                self.proc = None

    def cancel(self) -> None:
        """No read is wanted after all (the spec was refused): the started one is stopped."""
        if self.proc is not None:
            from gpurig.read.bounded import stop

            stop(self.proc)

    def take(self, argv: list[str]) -> tuple[Started, float] | None:
        """The started read, where it is `argv`; else None (it is stopped, and what to start
        next time kept)."""
        if self.proc is not None and argv == self.kept:
            return self.proc, self.deadline
        if self.proc is not None:
            from gpurig.read.bounded import stop

            stop(self.proc)
        if self.kept != VARIES:
            runtime.keep(self.name, VARIES if self.proc is not None else argv, "read.")
        return None
