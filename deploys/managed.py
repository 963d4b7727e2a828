"""The converge's last word on a host: the errors drift would still report about what the
converge manages and cannot fix (gpurig.checks.managed), said in drift's words, fail the host,
as a refusal does. Nothing is read for it on a host the run did not change (the one read holds
its facts); after a change, the facts of the rules that change touched, in one remote command."""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra import host
from pyinfra.api import deploy, operation

from gpurig.checks import managed
from gpurig.deploys import snapshot
from gpurig.report.render import one_line
from gpurig.spec.finding import Finding
from gpurig.spec.textsafe import visible


def left(spec: dict[str, Any]) -> list[Finding]:
    """The errors the converge leaves on this host: judged over its one read, and where a run
    changed a concern a rule follows, over a fresh read of that rule's facts (while pyinfra
    only prepares, such a rule waits for the run)."""
    changed = snapshot.changed()
    stale = managed.reads(spec, changed) if changed and host.state.is_executing else []
    again = snapshot.reread(stale) if stale else None
    return managed.left(spec, snapshot.first(), changed, again)


def refusal(found: list[Finding]) -> str:
    """The command that fails the host with each error on its own line, in drift's words."""
    lines = [visible(f"gpurig: {one_line(f)}") for f in found]
    return f"printf '%s\\n' {' '.join(shlex.quote(line) for line in lines)} >&2; exit 1"


@operation()
def nothing_left(spec: dict[str, Any]):
    """Fail the host when drift would still report an error the converge cannot fix."""
    found = left(spec)
    if not found:
        host.noop("no error left that the converge cannot fix")
        return
    yield refusal(found)


@deploy("Left as drift")
def left_as_drift(spec: dict[str, Any]) -> None:
    nothing_left(name="No error left that the converge cannot fix", spec=spec)
