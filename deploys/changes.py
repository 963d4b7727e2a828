"""What an operation does with its plan's changes: refuse them all, or go on."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from pyinfra import host
from pyinfra.api import OperationError

from gpurig.deploys.snapshot import changing
from gpurig.plans.change import Change


def start(changes: Sequence[Change], idle: str) -> bool:
    """False (and a no-op line) when there is nothing to do; raises with every refusal's
    reason; otherwise marks the host as changing and returns True."""
    refused = [c for c in changes if c.refused]
    if refused:
        found = "; ".join(f"{c.what}: expected {c.expected}, found {c.actual}" for c in refused)
        actions = list(dict.fromkeys(c.action for c in refused))  # one reason, said once
        raise OperationError(f"{found}. {'; '.join(actions)}")
    if not changes:
        host.noop(idle)
        return False
    changing(c.id for c in changes)
    return True


def apply(
    changes: Sequence[Change], idle: str, commands: Callable[[Change], Iterable[Any]]
) -> Iterator[Any]:
    """An operation's body: refuse or say there is nothing to do, else each change's commands."""
    if start(changes, idle):
        for change in changes:
            yield from commands(change)
