"""Acceptance measured on the host: the acceptance script's JSON (inside the declared GPU
container, or on the host) and `dcgmi diag -r 1` when DCGM is installed.

Run only on a host whose GPU query (facts.gpurig_nvidia.NvidiaGpus) lists a GPU; judged by
gpurig.read.acceptance, which never trusts what it parses.
"""

from __future__ import annotations

import secrets
import shlex
from typing import Any

from gpurig.facts.gpurig_container import ThroughUserSocket
from gpurig.facts.reader import Reader
from gpurig.read.acceptance import ACCEPTANCE_SCRIPT, parse_result

DCGMI_TIMEOUT = 300  # level 1 takes under a minute (DCGM's docs); a hung diag must not hang us
MAX_OUTPUT = 65536


class Acceptance(Reader[dict[str, Any]]):
    """{"result": dict | None, "error": str | None, "dcgmi": {...} | None}."""

    shell_executable = "sh"

    @staticmethod
    def default() -> dict[str, Any]:
        return {"result": None, "error": None, "dcgmi": None}

    def command(self, engine: str | None = None, container: str | None = None) -> str:
        self._marker = m = f"--gpurig-accept-{secrets.token_hex(8)}"
        python = f"python3 -c {shlex.quote(ACCEPTANCE_SCRIPT)}"
        if container:  # the engine and the name come from the validated inventory
            python = f"{shlex.quote(engine or 'docker')} exec {shlex.quote(container)} {python}"
        return f"""\
printf '%s\\n' {m}-result
{python} 2>&1 | tail -c {MAX_OUTPUT}; echo
command -v dcgmi >/dev/null 2>&1 || exit 0
out=$(timeout {DCGMI_TIMEOUT} dcgmi diag -r 1 2>&1); rc=$?
printf '%s %s\\n' {m}-dcgmi "$rc"
printf '%s\\n' "$out" | head -c {MAX_OUTPUT}
"""

    def process(self, output: list[str]) -> dict[str, Any]:
        m = self._marker
        sections: dict[str, list[str]] = {}
        current: list[str] | None = None
        dcgmi_exit = None
        for line in output:
            if line == f"{m}-result":
                current = sections.setdefault(line[len(m) + 1 :], [])
            elif line.startswith(f"{m}-dcgmi ") and line.split()[1].isdigit():
                dcgmi_exit, current = int(line.split()[1]), sections.setdefault("dcgmi", [])
            elif current is not None:
                current.append(line)
        found = self.default()
        text = "\n".join(sections.get("result", []))
        if text.strip():
            try:
                found["result"] = parse_result(text)
            except ValueError as exc:
                found["error"] = f"{exc}: {text.strip()[-300:]}"
        if dcgmi_exit is not None:
            found["dcgmi"] = {"exit": dcgmi_exit, "output": "\n".join(sections["dcgmi"])}
        return found


class UserAcceptance(ThroughUserSocket, Acceptance):
    """Acceptance with the container reached through the user's Podman API socket."""
