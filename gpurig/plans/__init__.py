"""One pure plan per concern: `plan(spec, read) -> [Change]`, the only judge of that concern.

`read(FactClass, **kwargs)` answers a fact: from the host's one-round-trip snapshot (drift, and
the converge until it changes something), or a `Recorder` that lists what a spec needs. Plans
read by the spec alone, never by what an earlier read returned, so the recorded reads are
exactly the reads made. The converge's operations call the same plans and yield commands for
their changes; `gpurig drift` reports them. The order is the converge's order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpurig.facts.round_trip import Read, required_reads
from gpurig.plans import (
    cleanup,
    compose,
    containers,
    core_dumps,
    driver,
    engine,
    packages,
    repos,
    secrets,
    toolkit,
)
from gpurig.plans.change import Change
from gpurig.spec.container import FIELD_NAMES
from gpurig.spec.finding import Severity

Reader = Callable[..., Any]

# Every id a plan can emit (tests/unit/test_plans.py has a case making each one fire).
CHANGE_IDS = (
    "packages.missing", "secret.missing", "secret.content", "secret.mode", "secret.owner",
    "secret.source", "core_dumps.file", "repo.missing", "repo.not_checkout", "repo.origin",
    "repo.credential", "repo.dirty", "repo.local_commits", "repo.attributes", "repo.ref",
    "repo.crlf", "repo.env",
    "repo.lockfile_missing", "repo.writable", "engine.systemd", "engine.service",
    "engine.daemon_json", "engine.insecure_registries", "engine.registries", "engine.socket",
    "engine.docker_host",
    "compose.plugin", "driver.unattended", "driver.hold", "driver.version", "driver.missing",
    "toolkit.keyring", "toolkit.apt", "toolkit.version", "toolkit.hold", "toolkit.runtime",
    "toolkit.oci_hook", "toolkit.cdi", "toolkit.gpu", *cleanup.IDS,
    "container.engine", "container.missing", "container.not_running", "tools.missing",
    "engine.rootless", "engine.user_service", "core_dumps.profile",
    *(f"container.{field}" for field in FIELD_NAMES),
)  # fmt: skip


def severity(change_id: str) -> Severity:
    """A change's severity as drift reports it: cleanup's leftovers are advice (the next
    converge removes them), every other change is drift."""
    return cleanup.SEVERITY if change_id in cleanup.IDS else "error"


# The converge's order: secrets first (sources checked before anything changes), code and its
# environments, then the engine and its compose plugin, the driver held before the toolkit
# (whose CDI spec names the driver); cleanup last before containers start.
PLANS: tuple[tuple[str, Callable[..., list[Change]]], ...] = (
    ("secrets", secrets.plan),
    ("packages", packages.plan),
    ("core_dumps", core_dumps.plan),
    ("repos", repos.plan),
    ("engine", engine.plan),
    ("compose", compose.plan),
    ("driver", driver.plan),
    ("toolkit", toolkit.plan),
    ("cleanup", cleanup.plan),
    ("containers", containers.plan),
)


def plan_host(spec: Mapping[str, Any], read: Reader, allow_recreate: bool = False) -> list[Change]:
    """Every change the converge would make (or refuses to make) on this host, in its order."""
    changes: list[Change] = []
    for name, plan in PLANS:
        changes += plan(spec, read, allow_recreate) if name == "containers" else plan(spec, read)
    return changes


def converge_reads(spec: Mapping[str, Any], allow_recreate: bool = False) -> list[Read]:
    """Every fact the converge's plans read for this spec: its one round trip."""
    return required_reads(lambda read: plan_host(spec, read, allow_recreate))
