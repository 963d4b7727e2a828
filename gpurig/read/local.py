"""This machine's state, read the way a node contract needs it: HostState's one command run by
`/bin/sh` in a subprocess, with no SSH stack, greenlets or pyinfra loaded (they cost a node
contract more than its whole read, at every job start). What pyinfra's @local connector did for this
read is done here, and more: the command runs bounded in time and bytes (gpurig.read.bounded)
and its output in lines."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpurig.facts.round_trip import HostState, Read
from gpurig.read import bounds
from gpurig.read.bounded import collect
from gpurig.read.forked import start

if TYPE_CHECKING:
    from gpurig.read.forked import Started


def lines(output: bytes) -> list[str]:
    """The output's lines as pyinfra hands them to a fact: split at newlines only, decoded with
    replacement. OutputFlood past bounds.MAX_OUTPUT_LINES, counted before any line is made."""
    if output.count(b"\n") > bounds.MAX_OUTPUT_LINES:
        raise bounds.OutputFlood(bounds.flood_reason(["stdout"]))
    found = output.decode("utf-8", "replace").split("\n")
    if found and found[-1] == "":
        found.pop()
    return found


# What a read started ahead (gpurig.node.ahead) is asked with the command wanted: the started
# command and its deadline where it is that command, else None (then it is run now).
StartedRead = Callable[[list[str]], "tuple[Started, float] | None"]


def read_argv(state: HostState, reads: list[Read], sudo: bool, bound: int | None) -> list[str]:
    """The command by which `state` reads `reads` on this machine (through `sudo -n`)."""
    argv = [HostState.shell_executable or "/bin/sh", "-c", state.command(reads, bound)]
    return ["sudo", "-n", "-H", "--", *argv] if sudo else argv


def read_here(
    reads: list[Read],
    sudo: bool,
    timeout: float,
    bound: int | None = None,
    ahead: StartedRead | None = None,
) -> dict[str, Any]:
    """HostState's values for `reads` on this machine ({} when the read ran out of time or
    printed nothing), through `sudo -n` when `sudo`; OutputFlood past the output bounds.
    `ahead` may hand over the same command, started earlier."""
    state = HostState()
    argv = read_argv(state, reads, sudo, bound)
    started = ahead(argv) if ahead is not None else None
    proc, deadline = started or (start(argv), time.monotonic() + timeout)
    output = collect(proc, deadline)
    found = lines(output) if output else []
    return state.process(found) if found else state.default()
