"""The converge lock's command and what its answers mean: one converge at a time per host (or
per user and node with scope: user). Shell text and parsing only, so `gpurig up --local`
takes the same lock as the converge over SSH (deploys/lock.py holds it on its own channel)
without loading an SSH stack."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from gpurig.plans.change import findings
from gpurig.plans.engine import squatted
from gpurig.report.render import one_line
from gpurig.spec.user_scope import NOT_OWN, is_user, lock_command

# In a directory only root may enter: any local user could otherwise hold the lock.
LOCK_DIR = "/run/gpurig"
LOCK = f"{LOCK_DIR}/converge.lock"
# A login without root or sudo locks its own runs only, in a directory it owns.
USER_LOCK = '"${XDG_RUNTIME_DIR:-$HOME/.cache}/gpurig/converge.lock"'
BUSY = 75  # flock -E: the lock is held by another converge


def hold_command(spec: Mapping[str, Any], sudo: bool, as_root: bool = True) -> str:
    """The command that takes the lock, says `held`, and keeps it until its stdin closes
    (exit BUSY when another converge holds it): scope: user takes the user's own lock (the one
    its Podman service starts under), a root login root's, any other login its own."""
    hold_it = "sh -c 'echo held; exec cat >/dev/null'"
    if is_user(spec):
        return lock_command(BUSY, hold_it)
    hold = f'flock -n -E {BUSY} "$lock" {hold_it}'
    if as_root:
        private = f"mkdir -p {LOCK_DIR} && chmod 700 {LOCK_DIR}"
        script = f"umask 077 && {private} && lock={LOCK} && {hold}"
    else:
        script = f'umask 077 && lock={USER_LOCK} && mkdir -p "${{lock%/*}}" && {hold}'
    # sudo is asked first with stdin closed: a refusal (its password line) comes back at once,
    # not once the lock's open stdin ends.
    return f"{'sudo -n true </dev/null && sudo -n ' if sudo else ''}sh -c {shlex.quote(script)}"


def not_own(answer: str) -> str | None:
    """Why the user's lock was refused, in drift's words, when the lock command's answer says
    the runtime directory is not the user's (user_scope.NOT_OWN); None for any other answer."""
    match = NOT_OWN.fullmatch(answer)
    if match is None:
        return None
    owner, user, directory = match.groups()
    if owner == "missing":
        return f"{directory}, {user}'s runtime directory, is missing and could not be made"
    return one_line(findings([squatted(directory, owner, user)])[0])
