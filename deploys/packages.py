"""Debian packages the spec lists (`packages`), the install step other concerns reuse, and how
every apt command of the converge waits for another apt or dpkg: a fresh cloud image runs
unattended-upgrades for minutes after boot, holding dpkg's and apt's locks."""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra import host
from pyinfra.api import deploy, operation

from gpurig.deploys.changes import apply
from gpurig.deploys.snapshot import read
from gpurig.plans import packages as plan
from gpurig.plans.change import Change

# Seconds each apt command waits for another apt or dpkg to release its locks (override per
# run: `--data apt_lock_wait=SECONDS`).
APT_LOCK_WAIT = 600
# How apt and dpkg say that another process holds a lock (apt 2.2-3.0; dpkg 1.20 and 1.21 say
# "was locked by another process with pid N", 1.22 names the holder's program instead:
# tests/fixtures/release).
_HELD = ("Could not get lock", "lock was locked by",
         "Unable to acquire the dpkg frontend lock")  # fmt: skip


def lock_wait() -> int:
    return int(host.data.get("apt_lock_wait") or APT_LOCK_WAIT)


def apt(command: str) -> str:
    """`command` (apt-get or apt-mark) waiting up to lock_wait() seconds for another apt or
    dpkg, saying which lock it waits for; the holder is never touched. apt-get waits for dpkg's
    frontend lock itself (-o DPkg::Lock::Timeout); `apt-get update` (the lists lock) and
    apt-mark (dpkg's own lock) fail at once, so a refusal naming a held lock is retried."""
    wait = lock_wait()
    held = " ".join(f"-e {shlex.quote(text)}" for text in _HELD)
    waiting = shlex.quote(
        f"gpurig: waiting up to {wait} s for another apt or dpkg to finish (unattended-upgrades "
        "holds their locks for minutes after boot):"
    )
    gave_up = shlex.quote(f"gpurig: gave up after waiting {wait} s for another apt or dpkg:")
    return (
        f"(end=$(($(date +%s) + {wait})); said=; while :; do "
        f"{{ err=$({command} 2>&1 >&3 3>&-); }} 3>&1; rc=$?; "
        f"held=$(printf '%s\\n' \"$err\" | grep -m1 {held}); "
        'if [ $rc -eq 0 ] || [ -z "$held" ]; then '
        '[ -z "$err" ] || printf \'%s\\n\' "$err" >&2; exit $rc; fi; '
        f'if [ "$(date +%s)" -ge "$end" ]; then printf \'%s\\n\' "$err" >&2; '
        f'echo {gave_up} "$held" >&2; exit $rc; fi; '
        f'[ -n "$said" ] || echo {waiting} "$held" >&2; said=1; sleep 3; done)'
    )


def apt_get(arguments: str) -> str:
    """`apt-get ARGUMENTS`, non-interactive, waiting for dpkg's locks as `apt` says."""
    return apt(
        f"DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout={lock_wait()} {arguments}"
    )


def apt_install(arguments: str, names: str) -> str:
    """`apt-get install ARGUMENTS` that never removes a package (`--no-remove`): where apt
    would remove one to install `names` (a conflict: Docker's docker-ce against docker.io,
    under running containers), nothing is installed or removed, and the refusal names what
    apt would have removed (from apt's own simulation) and what to do."""
    install = apt_get(f"install -y -q --no-remove --no-install-recommends {arguments}")
    simulate = f"apt-get -s -q install --no-install-recommends {arguments}"
    said = shlex.quote(f"gpurig: refused: apt would remove these packages to install {names}:")
    todo = shlex.quote(
        " (they conflict). gpurig never removes a package; nothing was installed or removed. "
        "If they should go, remove them yourself (apt-get remove); if they do the same job "
        f"(Docker's docker-ce for docker.io), keep them and declare no {names}."
    )
    return (
        f"{{ {install}; }} || {{ rc=$?; gone=$({simulate} 2>/dev/null | "
        "sed -n 's/^Remv \\([^ ]*\\).*/\\1/p' | tr '\\n' ' ' | sed 's/ $//'); "
        f'[ -z "$gone" ] || echo {said} "$gone"{todo} >&2; exit $rc; }}'
    )


def install(change: Change) -> str:
    """apt-get for a `packages.missing` change; the lists are refreshed only then, so a
    converged host never needs the network. `--` keeps a name from being read as an option."""
    names = change.data["packages"]
    quoted = " ".join(shlex.quote(name) for name in names)
    return f"{apt_get('update -q')} && {apt_install(f'-- {quoted}', ', '.join(names))}"


@operation()
def declared_packages(spec: dict[str, Any]):
    """Install the spec's packages that are missing."""
    yield from apply(plan.plan(spec, read), "every declared package is installed",
                     lambda change: [install(change)])  # fmt: skip


@deploy("Packages")
def packages(spec: dict[str, Any]) -> None:
    if spec["packages"]:
        declared_packages(name=f"Install {', '.join(spec['packages'])}", spec=spec)
