"""The walk root acts by (gpurig/safe_path.py), as the shell text every command that acts as
root on a host path starts with: safe_path.sh's `walk` and `checked`."""

from __future__ import annotations

import os


def script(name: str) -> str:
    """The shell text of `name` beside these facts (os.path: a node contract loads no pathlib)."""
    with open(os.path.join(os.path.dirname(__file__), name), encoding="utf-8") as f:
        return f.read()


SAFE_PATH = script("safe_path.sh")
# `as_account UID GID COMMAND...`: what root runs as another account, that account alone.
AS_ACCOUNT = script("as_account.sh")
