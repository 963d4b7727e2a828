"""The converge's reader: facts come from the host's one-round-trip snapshot (facts/round_trip.py)
until an operation on the host changes something; from then on each read is fresh, so no
operation acts on state an earlier one has just changed.

It also keeps what the converge's last judge needs (deploys/managed.py): the one read itself,
and the concerns (a change id's first word) this run changed on the host, or will change where
pyinfra prepares operations before it runs them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pyinfra import host

from gpurig.facts.reader import Reader
from gpurig.facts.round_trip import HostState, Read, Snapshot

# By host name: pyinfra runs the deploy file once per host, operations later, in greenlets.
_SNAPSHOTS: dict[str, Snapshot] = {}
_FIRST: dict[str, Snapshot] = {}
# Concerns changed while executing, and those to change seen while preparing, by host name.
_CHANGED: dict[str, set[str]] = {}
_PENDING: dict[str, set[str]] = {}


# Seconds for the whole read: a host that stops answering fails alone, as in drift.
TIMEOUT = 120


def load(reads: Sequence[Read]) -> None:
    """Read every fact in `reads` with one remote command."""
    state = host.get_fact(HostState, reads=list(reads), _timeout=TIMEOUT)
    _SNAPSHOTS[host.name] = _FIRST[host.name] = Snapshot(state)
    _CHANGED[host.name], _PENDING[host.name] = set(), set()


def read(cls: type[Reader], **kwargs: Any) -> Any:
    """`host.get_fact`, answered from the snapshot while it is current."""
    snapshot = _SNAPSHOTS.get(host.name)
    if snapshot is not None and snapshot.holds(cls, kwargs):
        return snapshot(cls, **kwargs)
    return host.get_fact(cls, **kwargs)


def changing(ids: Iterable[str] = ()) -> None:
    """Called by an operation about to change the host (the ids of its changes): later reads
    go to the host. While pyinfra only prepares, the concerns are noted as to change."""
    concerns = {change_id.split(".")[0] for change_id in ids}
    if host.state.is_executing:
        _SNAPSHOTS.pop(host.name, None)
        _CHANGED.setdefault(host.name, set()).update(concerns)
    else:
        _PENDING.setdefault(host.name, set()).update(concerns)


def first() -> Snapshot:
    """The host's one read, as the converge made it (even once an operation changed things)."""
    return _FIRST[host.name]


def changed() -> set[str]:
    """The concerns this run has changed on the host (executing), or will change (preparing)."""
    return set((_CHANGED if host.state.is_executing else _PENDING).get(host.name, ()))


def reread(reads: Sequence[Read]) -> Snapshot:
    """A fresh read of `reads` in one remote command (after a change)."""
    return Snapshot(host.get_fact(HostState, reads=list(reads), _timeout=TIMEOUT))
