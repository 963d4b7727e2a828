"""Where a spec file's parse is kept between runs (gpurig.data.kept): the running account's
runtime directory, cleared at boot (root: /run/gpurig; others: $XDG_RUNTIME_DIR/gpurig), or
GPURIG_RUNTIME_DIR. A node contract at every job start then loads no YAML parser for a spec
that has not changed; a copy is trusted only as the account's own, as data, never code."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from gpurig import __version__
from gpurig.data import kept


def directory() -> Path | None:
    explicit = os.environ.get("GPURIG_RUNTIME_DIR")
    if explicit:
        return Path(explicit)
    if os.geteuid() == 0:
        return Path("/run/gpurig")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime, "gpurig") if runtime else None


def _name(text: str) -> str:
    """The copy's name: the text's and this gpurig's (a parse is this version's)."""
    digest = hashlib.sha256(f"{__version__}\0{text}".encode())
    return f"spec.{digest.hexdigest()[:32]}"


def kept_parse(text: str) -> Any | None:
    """The data `text` parsed to on an earlier run, or None."""
    where = directory()
    return None if where is None else kept.read(where, _name(text), os.geteuid())


# Specs kept a directory: a node's contracts share one spec file, but an account may run
# several (root's contracts and a test of a new spec beside them).
KEPT_SPECS = 8


def keep_parse(text: str, data: Any) -> None:
    """Keep the data `text` parses to for the next run, with the last few others."""
    where = directory()
    if where is not None:
        kept.keep(where, _name(text), data, "spec.*", mode=0o700, others=KEPT_SPECS - 1)
