"""What the health check does through SLURM's own tool: read the nodes' states and reasons (its
own, and its partitions' for the drain budget) in one call, drain it with gpurig's reason,
resume it. `scontrol` is taken from the system's directories
only (facts.round_trip.ROOT_PATH), never from the caller's PATH: this runs as root.
"""

from __future__ import annotations

import os
import re
import time

from gpurig.facts.round_trip import ROOT_PATH, root_tool
from gpurig.node.modes import Action, NodeState, parse_nodes
from gpurig.read import bounds
from gpurig.read.bounded import collect
from gpurig.read.forked import launch

TIMEOUT = 10  # seconds for one scontrol call (slurmctld's MessageTimeout default)
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class SlurmError(RuntimeError):
    """scontrol is missing, failed, or printed something else than a node's line."""


def node_name() -> str:
    """This node's SLURM name: slurmd's SLURMD_NODENAME, else the short host name."""
    name = os.environ.get("SLURMD_NODENAME") or os.uname().nodename.split(".", 1)[0]
    if not NODE_NAME.fullmatch(name):
        raise SlurmError(f"not a node name: {name!r}")
    return name


def _scontrol(*args: str) -> str:
    tool = root_tool("scontrol")
    if tool is None:
        raise SlurmError(f"no scontrol in {ROOT_PATH}")
    try:
        status, out, err = _run([tool, *args])
    except bounds.OutputFlood as exc:
        raise SlurmError(f"scontrol {args[0]}: {exc}") from None
    if status is None:
        raise SlurmError(f"scontrol {args[0]}: no answer within {TIMEOUT} s")
    if status != 0:
        raise SlurmError(f"scontrol {args[0]}: {(err or out).strip()[:300]}")
    return out


def _run(argv: list[str]) -> tuple[int | None, str, str]:
    """The exit status (None past TIMEOUT), stdout and stderr of `argv`, started as a read is
    (gpurig.read.forked.launch: forked where nothing has loaded threading, so a health check
    loads no subprocess, threading or locale, 5 ms of its start); stderr kept in a memory file
    and read once it exits, no second pipe to watch."""
    err = _scratch()
    try:
        proc = launch(argv, stderr=err)
        out = collect(proc, time.monotonic() + TIMEOUT)
        said = os.pread(err, 4096, 0)
    finally:
        os.close(err)
    if out is None:
        return None, "", ""
    return proc.returncode, out.decode(errors="replace"), said.decode(errors="replace")


def _scratch() -> int:
    """A descriptor of an anonymous file: a memfd, or a temporary file on a kernel before 3.17."""
    try:
        return os.memfd_create("scontrol-stderr")
    except (AttributeError, OSError):
        import tempfile

        with tempfile.TemporaryFile() as f:
            return os.dup(f.fileno())


def show_all(name: str) -> tuple[NodeState, list[NodeState]]:
    """This node and every node of the cluster, from one `scontrol show node` (bounded by
    TIMEOUT like every call): the drain budget counts the nodes of this node's partitions."""
    try:
        nodes = parse_nodes(_scontrol("show", "node", "--oneliner"))
    except ValueError as exc:
        raise SlurmError(f"scontrol show node: {exc}") from None
    mine = [n for n in nodes if n.name == name]
    if len(mine) != 1:
        raise SlurmError(f"scontrol show node: {name} listed {len(mine)} times")
    return mine[0], nodes


def apply(name: str, action: Action) -> None:
    """Drain `name` with the action's reason, or resume it."""
    if action is None:
        return
    verb, reason = action
    if verb == "drain":
        _scontrol("update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}")
    else:
        _scontrol("update", f"NodeName={name}", "State=RESUME")
