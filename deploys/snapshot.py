"""The converge's reader: facts come from the host's one-round-trip snapshot (facts/round_trip.py)
until an operation on the host changes something; from then on each read is fresh, so no
operation acts on state an earlier one has just changed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyinfra import host

from gpurig.facts.reader import Reader
from gpurig.facts.round_trip import HostState, Read, Snapshot

# By host name: pyinfra runs the deploy file once per host, operations later, in greenlets.
_SNAPSHOTS: dict[str, Snapshot] = {}


# Seconds for the whole read: a host that stops answering fails alone, as in drift.
TIMEOUT = 120


def load(reads: Sequence[Read]) -> None:
    """Read every fact in `reads` with one remote command."""
    state = host.get_fact(HostState, reads=list(reads), _timeout=TIMEOUT)
    _SNAPSHOTS[host.name] = Snapshot(state)


def read(cls: type[Reader], **kwargs: Any) -> Any:
    """`host.get_fact`, answered from the snapshot while it is current."""
    snapshot = _SNAPSHOTS.get(host.name)
    if snapshot is not None and snapshot.holds(cls, kwargs):
        return snapshot(cls, **kwargs)
    return host.get_fact(cls, **kwargs)


def changing() -> None:
    """Called by an operation about to change the host: later reads go to the host."""
    if host.state.is_executing:
        _SNAPSHOTS.pop(host.name, None)
