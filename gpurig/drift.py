"""`gpurig drift`: read every host in parallel through pyinfra's API (one remote command per
host), then judge it with the converge's own plans plus the checks.

An unreachable host, a failed probe or a host whose output cannot be parsed becomes a finding,
never a crash: a CI job must see the whole fleet's report even when one box is down or odd.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pyinfra.api import Config, Inventory, State
from pyinfra.api.exceptions import ConnectError
from pyinfra.api.host import Host as PyinfraHost

from facts.gpurig_host import HostState, Read, Snapshot, Unreadable, required_reads
from facts.gpurig_packages import DebStatus
from facts.gpurig_repo import RepoState
from facts.probe import Probe, probe_kwargs
from gpurig import pyinfra_guard
from gpurig.change import Change, findings
from gpurig.checks import check
from gpurig.container import running_image
from gpurig.finding import Finding
from gpurig.hostkeys import is_mismatch
from gpurig.inventory import Host
from gpurig.node_checks import (
    internal_error,
    key_changed,
    sudo_password,
    unreachable,
    unreadable,
)
from gpurig.plans import PLANS
from gpurig.plans.containers import inspect
from gpurig.plans.engine import toolkit_wanted
from gpurig.plans.toolkit import packages as toolkit_packages
from gpurig.pyinfra_inventory import pyinfra_hosts
from gpurig.report import HostReport
from gpurig.rules import one_per_cause
from gpurig.spec import normalise
from gpurig.user_scope import is_user

PROBE_TIMEOUT = 120  # seconds for the whole command; engines and GPUs can be slow to answer


# What odd host output raises while it is judged (a parser's refusal): that part becomes
# `state.unreadable`. A KeyError or TypeError is a bug in gpurig and fails its tests.
ODD_OUTPUT = (Unreadable, ValueError)


@dataclass(frozen=True)
class Scope:
    """Which of drift's reads a run makes: the converge's plans by name, and whether the probe
    looks into declared containers (inspect, torch) and environments (imports). The node
    contracts (gpurig/node_modes.py) read less, to finish within their engine's time."""

    plans: frozenset[str] = frozenset(name for name, _ in PLANS)
    containers: bool = True
    imports: bool = True
    bound: int | None = None  # seconds for each of the probe's calls (its default: 20)


EVERYTHING = Scope()


def drift_reads(spec: Mapping[str, Any], scope: Scope = EVERYTHING) -> list[Read]:
    """The plans' reads and the probe's, for this spec: one remote command."""

    def everything(read: Any) -> None:
        for name, plan in PLANS:
            if name in scope.plans:
                plan(spec, read)
        probe_of(spec, read, scope)

    return required_reads(everything)


def probe_reads(spec: Mapping[str, Any]) -> list[Read]:
    """The probe's reads alone: what onboarding judges before the host is converged."""
    return required_reads(lambda read: probe_of(spec, read))


def probe_of(
    spec: Mapping[str, Any], read: Any, scope: Scope = EVERYTHING
) -> dict[str, Any] | None:
    """The probe's document with each declared container's inspect (from its one reader).
    Every read is made by the spec alone, before anything read is looked at, so recording
    this function lists all it needs (onboarding's snapshot holds exactly that)."""
    kwargs = probe_kwargs(spec)
    if not scope.containers:
        kwargs["containers"] = []
    if not scope.imports:
        kwargs.pop("imports", None)
    if scope.bound is not None:
        kwargs["bound"] = scope.bound
    probe = read(Probe, **kwargs)
    inspects = {}
    if spec["engine"] != "none" and scope.containers:
        inspects = {name: inspect(read, spec, name) for name in spec["containers"]}
    if not probe or probe.get("error"):
        return probe
    containers = [{**c, "inspect": inspects.get(c["name"])} for c in probe.get("containers") or []]
    return {**probe, "containers": containers}


def evaluate(
    spec: Mapping[str, Any], values: Mapping[str, Any], scope: Scope = EVERYTHING
) -> list[Finding]:
    """Every finding for one host's state: the converge's changes (one finding per subject),
    then the checks, one per cause. A concern whose state could not be read is one
    `state.unreadable`; the others are still judged."""
    read = Snapshot(dict(values))
    changes: list[Change] = []
    unread: list[Finding] = []
    for name, plan in PLANS:
        if name not in scope.plans:
            continue
        try:
            changes += plan(spec, read)
        except ODD_OUTPUT as exc:
            unread.append(unreadable(name, exc))
    try:
        checked = check(spec, probe_of(spec, read, scope))
    except ODD_OUTPUT as exc:
        checked = [unreadable("checks", exc)]
    return one_per_cause([*findings(changes), *unread, *checked])


def fleet_facts(spec: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """What must match across a multi-node job, from the same snapshot: driver, CUDA (as the
    containers' torch was built), kernel, toolkit, image digests, deployed commits."""
    read = Snapshot(dict(values))
    facts: dict[str, Any] = {}
    try:
        probe = probe_of(spec, read) or {}
        gpus = (probe.get("gpu") or {}).get("gpus") or []
        facts["driver"] = gpus[0].get("driver_version") if gpus else None
        facts["kernel"] = (probe.get("host") or {}).get("kernel")
        facts["cuda"] = {c["name"]: (c.get("torch") or {}).get("cuda")
                         for c in probe.get("containers") or []}  # fmt: skip
        facts["image"] = {c["name"]: running_image(c.get("inspect") or {})
                          for c in probe.get("containers") or []}  # fmt: skip
        if toolkit_wanted(spec):
            installed = read(DebStatus, packages=toolkit_packages())
            facts["toolkit"] = (installed.get(toolkit_packages()[0]) or {}).get("version")
        facts["code"] = {
            path: (read(RepoState, path=path, ref=r["ref"],
                        lockfile=(r.get("python") or {}).get("lockfile"),
                        venv=(r.get("python") or {}).get("venv")) or {}).get("head")
            for path, r in spec["repos"].items()
        }  # fmt: skip
    except ODD_OUTPUT:
        pass  # a host whose state is odd has its findings; the fleet view shows what was read
    return facts


@dataclass(frozen=True)
class Probed:
    """One host's state, or the connection error that kept it from being read."""

    host: Host
    state: dict[str, Any] | None
    connect_error: str | None = None


# The read's error for a login whose sudo asked for a password (never sent).
SUDO_PASSWORD = "sudo: a password is required"


def connect_failure(host: Host, error: str) -> Finding:
    """`host.key_changed` when the recorded host key was refused, `host.sudo_password` when
    sudo asked for a password, else `host.unreachable`."""
    if error == SUDO_PASSWORD:
        return sudo_password(host.name)
    return key_changed(host.name, host.source, error) if is_mismatch(error) else unreachable(error)


# A further read on the same connection, given what the first one found (onboarding's reach).
Then = Callable[[PyinfraHost, dict[str, Any]], dict[str, Any]]


def _read_host(
    host: PyinfraHost,
    reads: list[Read],
    sudo: bool | None,
    then: Then | None = None,
    timeout: int | None = None,
) -> tuple[dict[str, Any] | None, str | None]:
    try:
        host.connect(show_errors=False, raise_exceptions=True)
    except ConnectError as exc:
        return None, str(exc.args[0])
    # None: the host's data decides (sudo for a non-root login); onboard probes as the login.
    arguments = {} if sudo is None else {"_sudo": sudo}
    try:
        state = host.get_fact(
            HostState,
            reads=reads,
            _timeout=timeout or PROBE_TIMEOUT,  # read at call time (tests shorten it)
            _ignore_errors=True,
            **arguments,
        )
        if host.connector_data.get(pyinfra_guard.SUDO_REFUSED):
            return None, SUDO_PASSWORD
        if then is not None:
            state = then(host, state)
    except (OSError, EOFError) as exc:  # the host died mid-command: its failure only
        return None, f"connection lost: {exc or type(exc).__name__}"
    finally:
        host.disconnect()
    return state, None


def _prepare_pyinfra() -> None:
    """gpurig's guards on pyinfra's run (pyinfra_guard); pyinfra and paramiko log connection
    and fact errors themselves, and they are findings here."""
    pyinfra_guard.install()
    for name in ("pyinfra", "paramiko"):
        logging.getLogger(name).addHandler(logging.NullHandler())
        logging.getLogger(name).propagate = False


def probe_hosts(
    hosts: Sequence[Host],
    cache: Path,
    progress: TextIO | None = None,
    sudo: bool | None = None,
    reads: Callable[[Mapping[str, Any]], list[Read]] = drift_reads,
    then: Then | None = None,
) -> list[Probed]:
    """Connect (strict host keys) and read `hosts` in parallel; results in inventory order."""
    inventory = Inventory((pyinfra_hosts(hosts, cache), {}))
    # pyinfra's own parallelism, as the converge has it: min(20 per CPU, hosts, what the
    # open-files limit allows). All hosts at once made 300 key exchanges queue for one
    # process's CPU: 61 of 300 hosts at 150 ms failed them ("No existing session").
    state = State(inventory, Config())
    _prepare_pyinfra()

    def probe(host: Host) -> Probed:
        pyinfra_host = inventory.get_host(host.name)
        read = reads(normalise(host.spec))
        return Probed(host, *_read_host(pyinfra_host, read, sudo, then))

    done: dict[str, Probed] = {}
    for result in state.pool.imap_unordered(probe, hosts):
        done[result.host.name] = result
        if progress is not None:
            progress.write(f"\r[{len(done)}/{len(hosts)}] {result.host.name}\033[K")
            progress.flush()
    if progress is not None:
        progress.write("\n")
    return [done[h.name] for h in hosts]


def report(result: Probed, scope: Scope = EVERYTHING) -> HostReport:
    """One host's report; nothing a host printed can stop the others' reports."""
    name = result.host.name
    if result.connect_error is not None:
        return HostReport(name, False, [connect_failure(result.host, result.connect_error)])
    if not result.state:
        why = "the host printed nothing (timeout, or a shell error)"
        return HostReport(name, True, [unreadable("state", RuntimeError(why))])
    try:
        spec = normalise(result.host.spec)
        findings = evaluate(spec, result.state, scope)
        facts = fleet_facts(spec, result.state) if scope == EVERYTHING else {}
        return HostReport(name, True, findings, facts)
    except Exception as exc:  # a bug in gpurig: this host's report says so, the others go on
        return HostReport(name, True, [internal_error(exc)])


def run_drift(
    hosts: Sequence[Host], cache: Path, progress: TextIO | None = None
) -> list[HostReport]:
    """Read and judge `hosts` in parallel; reports in inventory order."""
    return [report(result) for result in probe_hosts(hosts, cache, progress)]


def local_sudo() -> bool:
    """Whether this machine is read through `sudo -n`, as a non-root SSH login is (host_data):
    for a user who is not root and may run sudo without a password. Nothing could answer a
    password prompt in a prolog or a CI job, so without that the user reads as itself."""
    if os.geteuid() == 0 or shutil.which("sudo") is None:
        return False
    ask = ["sudo", "-n", "true"]
    try:
        done = subprocess.run(ask, stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def drift_local(host: Host, scope: Scope = EVERYTHING, timeout: int | None = None) -> HostReport:
    """Read and judge this machine as `host`: the same one command, plans and checks as
    `run_drift`, run by pyinfra's @local connector (sh in a subprocess, no SSH), reading what
    `scope` says within `timeout` seconds.

    As root (a SLURM prolog, a health check, node-problem-detector) nothing it starts is
    found through the caller's PATH or working directory, which another account may write:
    HostState is `/bin/sh`, which reads from `/` with the system's own PATH."""
    return report(read_local(host, scope, timeout), scope)


def read_local(host: Host, scope: Scope = EVERYTHING, timeout: int | None = None) -> Probed:
    """This machine read as `host` by pyinfra's @local connector (sh in a subprocess, no
    SSH), through sudo where passwordless (never with scope: user, which acts as the user).
    A read past `timeout` is pyinfra's fact default, {}: `state.unreadable`, said so."""
    inventory = Inventory((["@local"], {}))
    State(inventory, Config())
    _prepare_pyinfra()
    spec = normalise(host.spec)
    sudo = not is_user(spec) and local_sudo()
    reads = drift_reads(spec, scope)
    return Probed(host, *_read_host(inventory.get_host("@local"), reads, sudo, timeout=timeout))


def progress_stream() -> TextIO | None:
    """stderr when a person is watching it; CI logs get no progress noise."""
    return sys.stderr if sys.stderr.isatty() else None
