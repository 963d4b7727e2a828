"""`gpurig drift`'s judge: a host's one read judged with the converge's own plans plus the
checks. Reading hosts over SSH is gpurig.remote.drift's, reading this machine
gpurig.node.read's.

An unreachable host or a host whose output cannot be parsed becomes a finding,
never a crash: a CI job must see the whole fleet's report even when one box is down or odd.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gpurig.checks import fabric
from gpurig.checks.all import ODD_OUTPUT, check
from gpurig.checks.node import (
    internal_error,
    key_changed,
    sudo_password,
    unreachable,
    unreadable,
)
from gpurig.checks.rules import one_per_cause
from gpurig.facts.gpurig_container import ContainerInspect, ContainerTorch
from gpurig.facts.gpurig_nvidia import NvidiaGpus
from gpurig.facts.gpurig_packages import DebStatus, OsRelease
from gpurig.facts.gpurig_repo import RepoState
from gpurig.facts.round_trip import Read, Snapshot, required_reads
from gpurig.named_tuple import NamedTuple
from gpurig.plans import PLANS
from gpurig.plans.change import Change, findings
from gpurig.plans.containers import container_reads
from gpurig.plans.toolkit import packages as toolkit_packages
from gpurig.read import bounds
from gpurig.spec.container import running_image
from gpurig.spec.finding import Finding, HostReport
from gpurig.spec.hostkeys import is_mismatch
from gpurig.spec.model import toolkit_wanted

if TYPE_CHECKING:  # judging a read needs no inventory validator (jsonschema, ruamel)
    from gpurig.spec.inventory import Host

PROBE_TIMEOUT = bounds.PROBE_TIMEOUT  # here too: a test shortens drift's at call time


class Scope(NamedTuple):
    """Which of drift's reads a run makes: the converge's plans by name, and whether the checks
    look into declared containers (inspect, torch) and environments (imports). The node
    contracts (gpurig/node/modes.py) read less, to finish within their engine's time."""

    plans: frozenset[str] = frozenset(name for name, _ in PLANS)
    containers: bool = True
    imports: bool = True
    bound: int | None = None  # seconds for each call a fact bounds (its default: 20)


EVERYTHING = Scope()


def judge(spec: Mapping[str, Any], read: Any, scope: Scope = EVERYTHING) -> list[Finding]:
    """Every finding for one host's state: the converge's changes (one finding per subject),
    then the checks, one per cause. A concern whose state could not be read is one
    `state.unreadable`; the others are still judged. Through a Recorder it lists the reads."""
    changes: list[Change] = []
    unread: list[Finding] = []
    for name, plan in PLANS:
        if name not in scope.plans:
            continue
        try:
            changes += plan(spec, read)
        except ODD_OUTPUT as exc:
            unread.append(unreadable(name, exc))
    checked = check(spec, read, scope.containers, scope.imports)
    return one_per_cause([*findings(changes), *unread, *checked])


def drift_reads(spec: Mapping[str, Any], scope: Scope = EVERYTHING) -> list[Read]:
    """The plans', the checks' and (reading everything) the fleet view's reads for this spec:
    one remote command."""

    def everything(read: Any) -> None:
        judge(spec, read, scope)
        if scope == EVERYTHING:
            fleet_facts(spec, read)

    return required_reads(everything)


def evaluate(
    spec: Mapping[str, Any], values: Mapping[str, Any], scope: Scope = EVERYTHING
) -> list[Finding]:
    """Every finding for one host's recorded state (HostState's values)."""
    return judge(spec, Snapshot(dict(values)), scope)


def fleet_facts(spec: Mapping[str, Any], read: Any) -> dict[str, Any]:
    """What must match across a multi-node job, read through the same reader (the host's
    snapshot): driver, CUDA (as the containers' torch was built), kernel, toolkit, image
    digests, deployed commits, the fabric's MTU, port rates and RDMA devices. A piece whose
    state is odd is left out (its findings say so)."""

    def toolkit() -> str | None:
        installed = read(DebStatus, packages=toolkit_packages())
        return (installed.get(toolkit_packages()[0]) or {}).get("version")

    pieces: dict[str, Callable[[], Any]] = {
        "driver": lambda: read(NvidiaGpus)["driver"],
        "kernel": lambda: read(OsRelease)["kernel"],
        "cuda": lambda: {name: (torch or {}).get("cuda")
                         for name, torch in container_reads(spec, read, ContainerTorch).items()},
        "image": lambda: {name: running_image(found["inspect"] or {})
                          for name, found in container_reads(spec, read, ContainerInspect).items()},
        **({"toolkit": toolkit} if toolkit_wanted(spec) else {}),
        "code": lambda: {
            path: (read(RepoState, path=path, ref=r["ref"],
                        lockfile=(r.get("python") or {}).get("lockfile"),
                        venv=(r.get("python") or {}).get("venv")) or {}).get("head")
            for path, r in spec["repos"].items()
        },
        **fabric.fleet_pieces(spec, read),
    }  # fmt: skip
    facts: dict[str, Any] = {}
    for key, piece in pieces.items():
        try:
            facts[key] = piece()
        except ODD_OUTPUT:
            continue
    return facts


class Probed(NamedTuple):
    """One host's state, or the connection error that kept it from being read."""

    host: Host
    state: dict[str, Any] | None
    connect_error: str | None = None
    tries: int = 1  # connections tried before it answered (or gave up)


# The read's error for a login whose sudo asked for a password (never sent).
SUDO_PASSWORD = "sudo: a password is required"


def connect_failure(host: Host, error: str) -> Finding:
    """`host.key_changed` when the recorded host key was refused, `host.sudo_password` when
    sudo asked for a password, `state.unreadable` when its output flooded the bounds, else
    `host.unreachable`."""
    if error == SUDO_PASSWORD:
        return sudo_password(host.name)
    if error.startswith(bounds.FLOOD_PREFIX):
        return unreadable("state", RuntimeError(error))
    return key_changed(host.name, host.source, error) if is_mismatch(error) else unreachable(error)


def report(result: Probed, scope: Scope = EVERYTHING) -> HostReport:
    """One host's report; nothing a host printed can stop the others' reports."""
    name, tries = result.host.name, result.tries
    if result.connect_error is not None:
        # A host whose sudo asked for a password answered SSH: reachable, though not read.
        answered = result.connect_error == SUDO_PASSWORD
        found = [connect_failure(result.host, result.connect_error)]
        return HostReport(name, answered, found, tries=tries)
    if not result.state:
        why = "the host printed nothing (timeout, or a shell error)"
        return HostReport(name, True, [unreadable("state", RuntimeError(why))], tries=tries)
    try:
        spec = result.host.spec
        findings = evaluate(spec, result.state, scope)
        facts = fleet_facts(spec, Snapshot(result.state)) if scope == EVERYTHING else {}
        return HostReport(name, True, findings, facts, tries)
    except Exception as exc:  # a bug in gpurig: this host's report says so, the others go on
        return HostReport(name, True, [internal_error(exc)], tries=tries)
