"""Acceptance measured on the host: the acceptance script's JSON (inside the declared GPU
container, or on the host), nccl-tests' `all_reduce_perf` across the host's GPUs where it is
installed there (two GPUs or more), and `dcgmi diag -r 1` when DCGM is installed; and, from a
group's first host, `all_reduce_perf` across every host of the group (GroupAllReduce).

Run only on a host whose GPU query (facts.gpurig_nvidia.NvidiaGpus) lists a GPU; judged by
gpurig.read.acceptance, which never trusts what it parses.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from gpurig.facts.round_trip import START, Sectioned, exit_status, section, step
from gpurig.read.acceptance import ACCEPTANCE_SCRIPT, parse_result
from gpurig.read.nccl_group import GROUP_TIMEOUT, launch, mpirun_argv
from gpurig.spec.user_scope import CONTAINER_HOST

DCGMI_TIMEOUT = 300  # level 1 takes under a minute (DCGM's docs); a hung diag must not hang us
# all_reduce_perf at one 16 GiB size takes well under a minute on 8 NVLink GPUs; a hung
# collective (the failure it looks for) must not hang acceptance.
NCCL_TIMEOUT = 300
MAX_OUTPUT = 65536


class Acceptance(Sectioned[dict[str, Any]]):
    """{"result": dict | None, "error": str | None, "dcgmi": {"exit", "output"} | None,
    "nccl": {"exit", "output"} | None} (all_reduce_perf's, judged by gpurig.read.nccl_tests).

    Framed by the run's nonce (facts.round_trip: `step()`): the script, dcgmi and
    all_reduce_perf run in the user's image, and what they print can forge neither another
    step's section nor a step's exit status, which the shell prints after each body."""

    shell_executable = "sh"
    prefix = ""  # what runs first: UserAcceptance points podman at the user's socket

    def command(
        self,
        engine: str | None = None,
        container: str | None = None,
        gpus: int = 0,
        nccl_bytes: int = 0,
    ) -> str:
        inside = ""
        if container:  # the engine and the name come from the validated inventory
            inside = f"{shlex.quote(engine or 'docker')} exec {shlex.quote(container)} "
        steps = [
            section(
                "part",
                "result",
                f"{inside}python3 -c {shlex.quote(ACCEPTANCE_SCRIPT)} 2>&1 | tail -c {MAX_OUTPUT}",
            )
        ]
        if gpus >= 2:  # one GPU has no peer to all-reduce with
            script = (
                "p=$(command -v all_reduce_perf) || "
                "{ echo 'all_reduce_perf: not found'; exit 127; }\n"
                # As root, only a binary no other account can change (DESIGN: untrusted hosts).
                '[ "$(id -u)" != 0 ] || [ -n "$(find "$p" -maxdepth 0 -user 0 ! -perm /022)" ] '
                '|| { echo "all_reduce_perf: $p is writable by others"; exit 126; }\n'
                f'exec "$p" -b {int(nccl_bytes)} -e {int(nccl_bytes)} -f 2 -g {int(gpus)} -c 1'
            )
            steps.append(
                step(
                    "part",
                    "nccl",
                    bounded_tail(f"{inside}sh -c {shlex.quote(script)}", NCCL_TIMEOUT),
                )
            )
        dcgmi = step("part", "dcgmi", bounded_tail("dcgmi diag -r 1", DCGMI_TIMEOUT, "head"))
        steps.append(f"if command -v dcgmi >/dev/null 2>&1; then\n{dcgmi}\nfi")
        return self.prefix + "\n".join([START, *steps])

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        found: dict[str, Any] = {"result": None, "error": None, "dcgmi": None, "nccl": None}
        text = parts.get("result", "")
        if text.strip():
            try:
                found["result"] = parse_result(text)
            except ValueError as exc:
                found["error"] = f"{exc}: {text.strip()[-300:]}"
        for tool in ("dcgmi", "nccl"):
            status = exit_status(parts.get(f"{tool}.exit"))
            if status is not None:
                found[tool] = {"exit": status, "output": parts.get(tool, "")}
        return found


def bounded_tail(command: str, seconds: int, keep: str = "tail") -> str:
    """A step's body: `command` under `timeout`, its output (with stderr) cut to MAX_OUTPUT
    bytes (the end, or the start with keep="head"), and its own exit status as the body's."""
    return (
        f"out=$(timeout {int(seconds)} {command} 2>&1); rc=$?\n"
        f"printf '%s\\n' \"$out\" | {keep} -c {MAX_OUTPUT}\nexit $rc"
    )


class UserAcceptance(Acceptance):
    """Acceptance with the container reached through the user's Podman API socket (as
    ThroughUserSocket does for the other container facts)."""

    prefix = f"export {CONTAINER_HOST}\n"


class GroupAllReduce(Sectioned[dict[str, Any] | None]):
    """all_reduce_perf across a group's hosts, launched by mpirun on the group's first host
    (gpurig.read.nccl_group builds and checks the command line): {"exit", "output"}, or None
    where no exit status was printed. Framed like Acceptance: what the ranks print, in the
    user's image, can forge neither the section nor the status."""

    shell_executable = "sh"
    prefix = ""

    def command(
        self,
        hosts: list[tuple[str, int]] | None = None,
        nccl_bytes: int = 0,
        engine: str = "docker",
        container: str | None = None,
        image: str | None = None,
    ) -> str:
        command = launch(mpirun_argv(hosts or [], nccl_bytes), engine, container, image)
        body = bounded_tail(command, GROUP_TIMEOUT)
        return self.prefix + "\n".join([START, step("part", "nccl", body)])

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any] | None:
        status = exit_status(parts.get("nccl.exit"))
        return None if status is None else {"exit": status, "output": parts.get("nccl", "")}


class UserGroupAllReduce(GroupAllReduce):
    """GroupAllReduce through the user's Podman API socket."""

    prefix = UserAcceptance.prefix
