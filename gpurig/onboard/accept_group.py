"""`gpurig accept --group NAME`: nccl-tests' all_reduce_perf across every host of an inventory
group, launched by mpirun from the group's first host (gpurig.read.nccl_group), judged and
recorded beside the hosts' own acceptance records (`<inventory's directory>/groups/NAME.json`).

Refused before any host is touched where the specs say it cannot run (gpurig.read.nccl_group:
`check_specs`), and before anything runs where a host lists no GPU. Round trips: one GPU query
per host (the others' first, in parallel), and on the first host its GPU query then the run, on
one connection.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpurig.facts.gpurig_acceptance import GroupAllReduce, UserGroupAllReduce
from gpurig.fsutil import atomic_write
from gpurig.onboard.accept import GPU_QUERY, all_reduce_words, inventory_dir, listed_gpus
from gpurig.read.nccl_group import (
    GROUP_TIMEOUT,
    Member,
    Refused,
    check_listed,
    judge_group,
    place,
)
from gpurig.read.nccl_tests import NcclVerdict, message_bytes
from gpurig.spec.inventory import Host
from gpurig.spec.textsafe import visible
from gpurig.spec.user_scope import is_user


@dataclass(frozen=True)
class GroupAccepted:
    """One group's all-reduce: where mpirun ran, the hosts with their GPUs, the verdict."""

    group: str
    ran_in: str
    members: list[Member]
    verdict: NcclVerdict
    when: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    @property
    def failed(self) -> bool:
        return self.verdict.status == "fail"


def ran_in(first: Host) -> str:
    """Where mpirun runs, in words (the spec's place on the group's first host)."""
    _, container, image = place(first.spec)
    return f"{f'container {container}' if container else f'image {image}'} on {first.name}"


def measure_group(group: str, hosts: Sequence[Host], cache: Path) -> GroupAccepted:
    """Read every host's GPUs, then run and judge the all-reduce from the first host, for a
    group whose specs `check_specs` passed (the CLI checks them before anything loads). Raises
    Refused (nothing run) where a host lists no GPU."""
    from gpurig.remote.drift import probe_hosts  # pyinfra's API: loaded only when hosts are read

    first, spec = hosts[0], hosts[0].spec
    engine, container, image = place(spec)
    fact = UserGroupAllReduce if is_user(spec) else GroupAllReduce
    where = ran_in(first)

    members: list[Member] = []
    for probed in probe_hosts(hosts[1:], cache, reads=lambda spec: GPU_QUERY):
        listed = listed_gpus(probed.state) if probed.state is not None else None
        if listed is None:
            return _unread(group, where, [], probed)
        members.append(Member(probed.host.name, probed.host.address, tuple(listed)))
    check_listed(group, members)  # before the first host is touched: nothing runs

    def run(pyinfra_host: Any, state: dict[str, Any]) -> dict[str, Any]:
        listed = listed_gpus(state)
        if listed is None:
            return state
        group_members = [Member(first.name, first.address, tuple(listed)), *members]
        try:
            check_listed(group, group_members)
        except Refused as exc:
            return {**state, "refused": str(exc)}
        gpus = sum(len(m.gpus) for m in group_members)
        found = pyinfra_host.get_fact(
            fact,
            hosts=[(m.address, len(m.gpus)) for m in group_members],
            nccl_bytes=message_bytes(listed[0], gpus, len(group_members)),
            engine=engine,
            container=container,
            image=image,
            _timeout=GROUP_TIMEOUT + 60,
        )
        return {**state, "members": group_members, "nccl": found}

    [probed] = probe_hosts([first], cache, reads=lambda spec: GPU_QUERY, then=run)
    state = probed.state or {}
    if "refused" in state:
        raise Refused(state["refused"])
    if "members" not in state:
        return _unread(group, where, members, probed)
    return GroupAccepted(
        group, where, state["members"], judge_group(state["nccl"], state["members"])
    )


def _unread(group: str, where: str, members: list[Member], probed: Any) -> GroupAccepted:
    """A group failed because one of its hosts could not be read (as `accept HOST` fails)."""
    why = probed.connect_error or "its GPU query printed nothing readable"
    reason = f"cannot read {probed.host.name}: {why}"
    return GroupAccepted(group, where, members, NcclVerdict("fail", [reason], {"reason": reason}))


def record_path(group: str, first: Host, base: Path | None = None) -> Path:
    """Where the group's latest all-reduce is kept: beside its hosts' records, by name."""
    return inventory_dir(first, base) / "groups" / f"{group}.json"


def as_record(first: Host, accepted: GroupAccepted) -> dict[str, Any]:
    """The JSON record: the group, where it ran, each host with its GPUs, the verdict."""
    return {
        "group": accepted.group,
        "inventory": str(Path(first.source).resolve()),
        "when": accepted.when,
        "ran_in": accepted.ran_in,
        "hosts": [
            {
                "name": m.name,
                "address": m.address,
                "gpus": len(m.gpus),
                "models": sorted(set(m.gpus)),
            }
            for m in accepted.members
        ],
        "status": accepted.verdict.status,
        "reasons": accepted.verdict.reasons,
        "figures": {"nccl": {"status": accepted.verdict.status, **accepted.verdict.figures}},
    }


def save(first: Host, accepted: GroupAccepted, directory: Path | None = None) -> Path:
    """Write the record atomically; returns its path."""
    path = record_path(accepted.group, first, directory)
    atomic_write(path, json.dumps(as_record(first, accepted), indent=2) + "\n", 0o600)
    return path


def render(first: Host, accepted: GroupAccepted, fmt: str) -> str:
    """The report: one line per figure, or the JSON record (host text escaped)."""
    record = as_record(first, accepted)
    if fmt == "json":
        return json.dumps(record, indent=2) + "\n"
    hosts = ", ".join(
        f"{h['name']} ({h['gpus']}x {'/'.join(h['models'])})" for h in record["hosts"]
    )
    rows = [
        ("group", accepted.group),
        ("status", accepted.verdict.status),
        ("ran on", accepted.ran_in),
        ("hosts", hosts or "-"),
    ]
    if accepted.members:
        rows.append(("nccl all-reduce", all_reduce_words(record["figures"]["nccl"])))
    rows += [("reason", r) for r in accepted.verdict.reasons]
    width = max(len(k) for k, _ in rows)
    return "".join(f"{k:<{width}}  {visible(text)}\n" for k, text in rows)
