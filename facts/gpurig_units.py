"""systemd units: whether systemd runs the host at all, and each unit's active/enabled state."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from gpurig.facts.reader import Reader


class Units(Reader[dict[str, Any]]):
    """{"systemd": bool, "units": {unit: {"active": str, "enabled": str}}}."""

    @staticmethod
    def default() -> dict[str, Any]:
        return {"systemd": False, "units": {}}

    def command(self, units: Sequence[str]) -> str:
        lines = ["if [ ! -d /run/systemd/system ]; then echo nosystemd; else echo systemd"]
        for unit in units:
            u = shlex.quote(unit)
            lines.append(
                f"printf '%s\\t%s\\t%s\\n' {u} \"$(systemctl is-active {u} 2>/dev/null)\" "
                f'"$(systemctl is-enabled {u} 2>/dev/null)"'
            )
        return "\n".join([*lines, "fi"])

    def process(self, output: list[str]) -> dict[str, Any]:
        found = {"systemd": bool(output) and output[0] == "systemd", "units": {}}
        for line in output[1:]:
            unit, active, enabled = [*line.split("\t"), "", ""][:3]
            found["units"][unit] = {"active": active, "enabled": enabled}
        return found
