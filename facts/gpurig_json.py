"""A JSON config file on the host (e.g. /etc/docker/daemon.json), parsed."""

from __future__ import annotations

import json
import shlex
from typing import Any

from gpurig.facts.reader import Reader


class JsonFile(Reader):
    """The file's JSON object; {} when it does not exist, None when it is not valid JSON."""

    def command(self, path: str) -> str:
        q = shlex.quote(path)
        return f"if [ -e {q} ]; then cat {q}; else echo '{{}}'; fi"

    def process(self, output: list[str]) -> dict[str, Any] | None:
        try:
            data = json.loads("\n".join(output) or "{}")
        except json.JSONDecodeError:
            return None
        return data if isinstance(data, dict) else None
