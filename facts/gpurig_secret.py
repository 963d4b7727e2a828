"""A secret file on the host, seen only through its sha256, mode and owner: the content is
never read back, so it cannot leak through fact output or a diff."""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra.api import FactBase


class SecretFile(FactBase):
    """`{"sha256", "mode", "owner"}` of the regular file at `path`, or None when absent."""

    def command(self, path: str) -> str:
        p = shlex.quote(path)
        return (
            f"if [ -f {p} ]; then echo $(sha256sum < {p} | cut -c1-64) $(stat -c '%a %U' {p}); fi"
        )

    def process(self, output: list[str]) -> dict[str, Any] | None:
        fields = " ".join(output).split()
        if len(fields) != 3:
            return None
        return {"sha256": fields[0], "mode": fields[1], "owner": fields[2]}
