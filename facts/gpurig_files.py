"""Files gpurig manages, seen through a digest, mode and owner: content is never read back,
so a secret cannot leak through fact output, and a salt keeps its digest from being looked up
in -vvv output (the salt is per run, never stored)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from pyinfra.api import FactBase

from gpurig.user_scope import shell_path

_ROW = re.compile(r"(?P<i>\d+) (?P<sha>[0-9a-f]{64}) (?P<mode>[0-7]{1,4}) (?P<owner>\S+)")


class FileDigests(FactBase[dict[str, Any]]):
    """{path: {"sha256", "mode", "owner"} or None when it is not a regular file}; the sha256
    is of `salt` followed by the content."""

    @staticmethod
    def default() -> dict[str, Any]:
        return {}

    def command(self, paths: Sequence[str], salt: str = "") -> str:
        self._paths = list(paths)
        lines = [f"s={shlex.quote(salt)}", "i=0"]
        for path in paths:
            p = shell_path(path)  # a user's `~/...` is read from its own home
            lines.append(
                f"if [ -f {p} ] && [ ! -L {p} ]; then echo $i "
                f'$({{ printf %s "$s"; cat {p}; }} | sha256sum | cut -c1-64) '
                f"$(stat -c '%a %U' {p}); fi; i=$((i+1))"
            )
        return "\n".join(lines)

    def process(self, output: list[str]) -> dict[str, Any]:
        found: dict[str, Any] = {path: None for path in self._paths}
        for line in output:
            match = _ROW.fullmatch(line.strip())
            if match is None or int(match["i"]) >= len(self._paths):
                raise ValueError(f"unexpected line: {line[:80]!r}")
            found[self._paths[int(match["i"])]] = {
                "sha256": match["sha"],
                "mode": match["mode"],
                "owner": match["owner"],
            }
        return found
