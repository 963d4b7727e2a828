"""What the converge judges once its changes are made: the checks' errors about the concerns it
manages that no change of its own can clear (DESIGN: one model of the host). A converge that
leaves such an error behind says so in drift's words and fails that host, as it does for a
refusal, so that a converge exiting 0 never leaves drift reporting an error it could have seen.

The rule is restricted, on purpose, to the concerns the converge manages:

- core dumps (`core_dumps.login_shell`): a login file raises the limit after gpurig's line;
- the engine (`engine.api`): the Podman socket the converge starts does not answer;
- the repositories' environments (`env.imports`): a declared import that the environment it
  installs from the lockfile does not provide.

GPU health, compatibility, disk and inode headroom, memory, cgroups and the fabric are no
business of the converge: it cannot change them, and reading them would have it read all that
drift reads (GPU health, the kernel log and the fabric cost most of drift's read) on every
run. Drift reports them; a converge never fails for them.

Each rule comes with the concerns whose changes its facts follow (a change id's first word):
the converge judges a rule over its one read when none of them changed on this host, else over
a fresh read of that rule's facts alone (one more round trip, only after a change). The login
files are written by the core dumps and the engine's DOCKER_HOST lines; an environment by the
repos, and by cleanup (a stale editable finder it removes)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from gpurig.checks import container as container_checks
from gpurig.checks import node as node_checks
from gpurig.checks.all import ODD_OUTPUT
from gpurig.checks.rules import one_per_cause
from gpurig.facts.round_trip import Read, read_key, required_reads
from gpurig.plans import converge_reads as plans_reads
from gpurig.spec.finding import Finding

Reader = Callable[..., Any]
Spec = Mapping[str, Any]
Rule = Callable[[Spec, Reader], Iterator[Finding]]

MANAGED: tuple[tuple[Rule, frozenset[str]], ...] = (
    (node_checks.core_dumps, frozenset({"core_dumps", "engine"})),
    (container_checks.engine_api, frozenset({"engine"})),
    (node_checks.env_imports, frozenset({"repo", "cleanup"})),
)
# The ids of these rules' errors (a test holds each is a check's error, and none a plan's).
IDS = ("core_dumps.login_shell", "engine.api", "env.imports")


def _rules(stale: Collection[str] | None) -> list[Rule]:
    """The rules to judge: those following a concern in `stale` (None: every rule)."""
    return [rule for rule, follows in MANAGED if stale is None or follows & set(stale)]


def _fresh(stale: Collection[str]) -> list[Rule]:
    return [rule for rule, follows in MANAGED if not follows & set(stale)]


def reads(spec: Spec, stale: Collection[str] | None = None) -> list[Read]:
    """The facts the rules read for this spec (only the rules following a concern in `stale`,
    when given): what the converge adds to its one read, or reads again after a change."""
    return required_reads(lambda read: _judge(spec, read, _rules(stale)))


def _judge(spec: Spec, read: Reader, rules: list[Rule]) -> list[Finding]:
    found: list[Finding] = []
    for rule in rules:
        try:
            found += list(rule(spec, read))
        except ODD_OUTPUT as exc:  # as drift says it: this concern is unjudged, an error
            found.append(node_checks.unreadable("checks", exc))
    return found


def left(
    spec: Spec,
    first: Reader,
    changed: Collection[str] = (),
    again: Reader | None = None,
) -> list[Finding]:
    """The errors the converge leaves: each rule judged over `first` (the converge's one read)
    unless a concern it follows is in `changed`; then over `again` (a read of `reads(spec,
    changed)`), or not at all where there is none (a plan still to run: nothing to judge yet)."""
    found = _judge(spec, first, _fresh(changed))
    if changed and again is not None:
        found += _judge(spec, again, _rules(changed))
    return [f for f in one_per_cause(found) if f.severity == "error"]


def converge_reads(spec: Spec, allow_recreate: bool = False) -> list[Read]:
    """The converge's one read: its plans' facts, then these rules' (DESIGN: a no-op converge
    costs two round trips, the lock and this read)."""
    planned = plans_reads(spec, allow_recreate)
    keys = {read_key(cls, kwargs) for cls, kwargs in planned}
    return [*planned, *(r for r in reads(spec) if read_key(*r) not in keys)]
