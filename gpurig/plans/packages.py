"""Debian packages: the spec's own, and the tools other concerns need."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpurig.facts.gpurig_packages import DebProviders, DebStatus
from gpurig.facts.gpurig_user import Commands
from gpurig.plans.change import Change


def missing(
    names: Sequence[str],
    read: Callable[..., Any],
    why: str = "",
    user: bool = False,
    among: Sequence[str] = (),
    unless: Sequence[str] = (),
) -> list[Change]:
    """`packages.missing` for those of `names` neither installed nor provided by an installed
    package (apt would remove that package to install the name); for a user-scope converge
    (`user`), which installs nothing, `tools.missing` (refused) for those of them the login's
    PATH lacks. `among`: the packages to read, a superset of `names` fixed by the spec alone,
    where `names` depends on another read (the release). `unless`: packages that do the same
    job from another source (Docker's docker-ce for docker.io): one installed, none is
    missing."""
    if not names:
        return []
    if user:
        return _tools(names, read, why)
    state = read(DebStatus, packages=sorted(set(among or names)))
    elsewhere = read(DebStatus, packages=sorted(unless)) if unless else {}
    provided = read(DebProviders)
    if any((elsewhere.get(n) or {}).get("version") or n in provided for n in unless):
        return []
    absent = [n for n in names if not (state.get(n) or {}).get("version") and n not in provided]
    if not absent:
        return []
    listed = ", ".join(absent)
    return [
        Change(
            "packages.missing",
            f"packages {listed}{f' ({why})' if why else ''}",
            "installed",
            "not installed",
            f"install {listed} with apt",
            data={"packages": absent},
        )
    ]


def plan(spec: Mapping[str, Any], read: Callable[..., Any]) -> list[Change]:
    return missing(spec["packages"], read)


def _tools(names: Sequence[str], read: Callable[..., Any], why: str) -> list[Change]:
    found = read(Commands, names=sorted(set(names)))
    absent = [n for n in names if not found.get(n)]
    if not absent:
        return []
    listed = ", ".join(absent)
    return [
        Change(
            "tools.missing",
            f"{listed}{f' ({why})' if why else ''}",
            "on the PATH",
            "not found",
            f"ask the cluster's admins for {listed} (scope: user installs nothing), or load "
            "it in the environment gpurig runs in",
            refused=True,
        )
    ]
