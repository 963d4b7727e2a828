"""What the health check does through SLURM's own tool: read the nodes' states and reasons (its
own, and its partitions' for the drain budget) in one call, drain it with gpurig's reason,
resume it. `scontrol` is taken from the system's directories
only (facts.round_trip.ROOT_PATH), never from the caller's PATH: this runs as root.
"""

from __future__ import annotations

import os
import re
import subprocess

from gpurig.facts.round_trip import ROOT_PATH, root_tool
from gpurig.node.modes import Action, NodeState, parse_nodes

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
        done = subprocess.run([tool, *args], capture_output=True, text=True, errors="replace",
                              stdin=subprocess.DEVNULL, timeout=TIMEOUT, cwd="/")  # fmt: skip
    except subprocess.TimeoutExpired:
        raise SlurmError(f"scontrol {args[0]}: no answer within {TIMEOUT} s") from None
    if done.returncode != 0:
        raise SlurmError(f"scontrol {args[0]}: {(done.stderr or done.stdout).strip()[:300]}")
    return done.stdout


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
