"""Acceptance measured on the host: the acceptance script's JSON (inside the declared GPU
container, or on the host), nccl-tests' `all_reduce_perf` across the host's GPUs where it is
installed there (two GPUs or more), and `dcgmi diag -r 1` when DCGM is installed.

Run only on a host whose GPU query (facts.gpurig_nvidia.NvidiaGpus) lists a GPU; judged by
gpurig.read.acceptance, which never trusts what it parses.
"""

from __future__ import annotations

import secrets
import shlex
from typing import Any

from gpurig.facts.reader import Reader
from gpurig.read.acceptance import ACCEPTANCE_SCRIPT, parse_result
from gpurig.spec.user_scope import CONTAINER_HOST

DCGMI_TIMEOUT = 300  # level 1 takes under a minute (DCGM's docs); a hung diag must not hang us
# all_reduce_perf at one 16 GiB size takes well under a minute on 8 NVLink GPUs; a hung
# collective (the failure it looks for) must not hang acceptance.
NCCL_TIMEOUT = 300
MAX_OUTPUT = 65536


class Acceptance(Reader[dict[str, Any]]):
    """{"result": dict | None, "error": str | None, "dcgmi": {"exit", "output"} | None,
    "nccl": {"exit", "output"} | None} (all_reduce_perf's, judged by gpurig.read.nccl_tests)."""

    shell_executable = "sh"
    prefix = ""  # what runs first: UserAcceptance points podman at the user's socket

    @staticmethod
    def default() -> dict[str, Any]:
        return {"result": None, "error": None, "dcgmi": None, "nccl": None}

    def command(
        self,
        engine: str | None = None,
        container: str | None = None,
        gpus: int = 0,
        nccl_bytes: int = 0,
    ) -> str:
        self._marker = m = f"--gpurig-accept-{secrets.token_hex(8)}"
        inside = ""
        if container:  # the engine and the name come from the validated inventory
            inside = f"{shlex.quote(engine or 'docker')} exec {shlex.quote(container)} "
        python = f"{inside}python3 -c {shlex.quote(ACCEPTANCE_SCRIPT)}"
        nccl = ""
        if gpus >= 2:  # one GPU has no peer to all-reduce with
            script = (
                "p=$(command -v all_reduce_perf) || "
                "{ echo 'all_reduce_perf: not found'; exit 127; }\n"
                # As root, only a binary no other account can change (DESIGN: untrusted hosts).
                '[ "$(id -u)" != 0 ] || [ -n "$(find "$p" -maxdepth 0 -user 0 ! -perm /022)" ] '
                '|| { echo "all_reduce_perf: $p is writable by others"; exit 126; }\n'
                f'exec "$p" -b {int(nccl_bytes)} -e {int(nccl_bytes)} -f 2 -g {int(gpus)} -c 1'
            )
            nccl = f"""\
out=$(timeout {NCCL_TIMEOUT} {inside}sh -c {shlex.quote(script)} 2>&1); rc=$?
printf '%s %s\\n' {m}-nccl "$rc"
printf '%s\\n' "$out" | tail -c {MAX_OUTPUT}
"""
        return f"""{self.prefix}\
printf '%s\\n' {m}-result
{python} 2>&1 | tail -c {MAX_OUTPUT}; echo
{nccl}command -v dcgmi >/dev/null 2>&1 || exit 0
out=$(timeout {DCGMI_TIMEOUT} dcgmi diag -r 1 2>&1); rc=$?
printf '%s %s\\n' {m}-dcgmi "$rc"
printf '%s\\n' "$out" | head -c {MAX_OUTPUT}
"""

    def process(self, output: list[str]) -> dict[str, Any]:
        m = self._marker
        sections: dict[str, list[str]] = {}
        current: list[str] | None = None
        exits: dict[str, int] = {}
        for line in output:
            if line == f"{m}-result":
                current = sections.setdefault(line[len(m) + 1 :], [])
            elif line.startswith((f"{m}-dcgmi ", f"{m}-nccl ")) and line.split()[1].isdigit():
                part = line.split()[0][len(m) + 1 :]
                exits[part], current = int(line.split()[1]), sections.setdefault(part, [])
            elif current is not None:
                current.append(line)
        found = self.default()
        text = "\n".join(sections.get("result", []))
        if text.strip():
            try:
                found["result"] = parse_result(text)
            except ValueError as exc:
                found["error"] = f"{exc}: {text.strip()[-300:]}"
        if "dcgmi" in exits:
            found["dcgmi"] = {"exit": exits["dcgmi"], "output": "\n".join(sections["dcgmi"])}
        if "nccl" in exits:
            found["nccl"] = {"exit": exits["nccl"], "output": "\n".join(sections["nccl"])}
        return found


class UserAcceptance(Acceptance):
    """Acceptance with the container reached through the user's Podman API socket (as
    ThroughUserSocket does for the other container facts)."""

    prefix = f"export {CONTAINER_HOST}\n"
