"""Declared checkouts (`spec.repos`) at pinned commits, LF scripts, and locked Python
environments. A checkout is never deleted: the field notes' endless `git clone` restart loop
was "fixed" with `rm -rf`; here a dirty, diverged or foreign directory fails the host instead,
naming what it found (DESIGN: safety rules)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from pyinfra import host
from pyinfra.api import OperationError, deploy, operation
from pyinfra.facts.server import Which

from deploys.packages import ensure_packages
from facts.gpurig_repo import GIT_CHANGES, LF_ATTRIBUTES, LF_PATTERNS, LOCK_MARKER, RepoState
from gpurig.inventory import repo_venv

# Drops the requirements (and their `--hash` continuation lines) of kept packages; names are
# compared PEP 503-normalised. Runs with the venv's python: argv is the lockfile, then the names.
_FILTER = (
    "import re,sys\n"
    "n=lambda s:re.sub(r'[-_.]+','-',s).lower()\n"
    "keep={n(k) for k in sys.argv[2:]};skip=False\n"
    "for line in open(sys.argv[1]):\n"
    "    if not line[:1].isspace():\n"
    "        m=re.match(r'[A-Za-z0-9][A-Za-z0-9._-]*',line)\n"
    "        skip=bool(m) and n(m.group(0)) in keep\n"
    "    if not skip:\n"
    "        sys.stdout.write(line)\n"
)


def _q(*parts: str) -> str:
    return " ".join(shlex.quote(p) for p in parts)


def _add_attributes(path: str, lines: Sequence[str]) -> str:
    """Append gpurig's lines to the checkout's info/attributes (not tracked, so no dirt)."""
    text = "".join(f"{line}\n" for line in lines)
    return (
        f"a=$(git -C {_q(path)} rev-parse --path-format=absolute --git-path info/attributes) "
        f'&& mkdir -p "$(dirname "$a")" && printf %s {shlex.quote(text)} >> "$a"'
    )


def _normalise(path: str) -> str:
    """Rewrite CRLF scripts that carry an eol=lf attribute with LF, naming each one. Only run
    on a tree without the user's changes; files git would call modified stay equal to the
    commit but for the CRs (facts/git_changes.sh tells them apart)."""
    return (
        f"cd {_q(path)} && T=$(printf '\\t') && git ls-files --eol -- {_q(*LF_PATTERNS)} "
        '| sed -n "s/^[^$T]*w\\/crlf[^$T]*attr\\/[^$T]*eol=lf[^$T]*$T//p" '
        "| while IFS= read -r f; do sed -i 's/\\r$//' \"$f\" && "
        'echo "gpurig: LF line endings: $f"; done'
    )


def refusals(path: str, url: str, state: dict[str, Any]) -> list[str]:
    """What about an existing directory stops gpurig from touching it; empty when it may."""
    if not state.get("checkout"):
        return [f"{path} exists but is not a git checkout (move it away; gpurig never deletes it)"]
    found = []
    if state.get("origin") != url:
        found.append(f"its origin is {state.get('origin') or '(none)'}, the spec says {url}")
    if state["dirt"]:
        found.append(f"uncommitted changes: {'; '.join(d.strip() for d in state['dirt'])}")
    if state["local"]:
        found.append(f"commits on no remote: {'; '.join(state['local'])}")
    return [f"{path}: {'; '.join(found)}"] if found else []


@operation()
def repo(path: str, url: str, ref: str, line_endings: str = "lf"):
    """Clone `url` at `path`, or fetch and check out `ref` (detached) in a clean checkout."""
    state = host.get_fact(RepoState, path=path, ref=ref)
    lf = line_endings == "lf"
    if not state.get("exists"):
        parent = str(PurePosixPath(path).parent)
        yield f"mkdir -p {_q(parent)} && git clone --quiet --no-checkout -- {_q(url, path)}"
        if lf:
            yield _add_attributes(path, LF_ATTRIBUTES)
        yield f"git -C {_q(path)} checkout --quiet --detach {_q(ref)}"
        if lf:
            yield _normalise(path)
        return
    found = refusals(path, url, state)
    if found:
        raise OperationError(f"gpurig leaves the checkout alone: {' '.join(found)}")
    missing = [a for a in LF_ATTRIBUTES if a not in state["attributes"]] if lf else []
    if missing:
        yield _add_attributes(path, missing)
    if state.get("head") != ref:
        if not state.get("has_ref"):
            yield f"git -C {_q(path)} fetch --quiet --tags origin"
        if state["eol_only"]:
            # git calls gpurig's own LF rewrites local changes and will not switch over them;
            # --force is safe only while the user has none, checked again in the same shell.
            refuse = shlex.quote(f"gpurig: {path} changed meanwhile; left alone")
            yield (
                f"{GIT_CHANGES}\nif git_changes {_q(path)} | grep -q '^dirt'; "
                f"then echo {refuse} >&2; exit 1; fi\n"
                f"git -C {_q(path)} checkout --quiet --force --detach {_q(ref)}"
            )
        else:
            yield f"git -C {_q(path)} checkout --quiet --detach {_q(ref)}"
    elif not missing and not (lf and state["crlf"]):
        host.noop(f"{path} is at {ref[:12]}")
        return
    if lf:
        yield _normalise(path)


def _install(manager: str, path: str, lockfile: str, venv: str, keep: Sequence[str]) -> str:
    if manager == "uv":
        skip = "".join(f" --no-install-package {shlex.quote(k)}" for k in keep)
        return f"cd {_q(path)} && UV_PROJECT_ENVIRONMENT={_q(venv)} uv sync --locked --quiet{skip}"
    python, lock = f"{venv}/bin/python", f"{path}/{lockfile}"
    requirements = lock
    prefix = ""
    if keep:
        requirements = f"{venv}/.gpurig-requirements.txt"
        script = shlex.quote(_FILTER)
        prefix = f"{_q(python)} -c {script} {_q(lock, *keep)} > {_q(requirements)} && "
    return (
        # --force-reinstall: a changed lockfile is installed and hash-checked whole; pip checks
        # no hash of a package it finds already installed.
        f"{prefix}cd {_q(path)} && {_q(python)} -m pip install --quiet "
        "--disable-pip-version-check --require-hashes --no-deps --force-reinstall "
        f"-r {_q(requirements)}"
    )


@operation()
def python_env(
    path: str,
    ref: str,
    lockfile: str,
    venv: str,
    manager: str = "uv",
    keep: Sequence[str] = (),
):
    """Install `lockfile` into `venv` exactly, leaving `keep` packages as the image ships
    them (the venv sees the system's through --system-site-packages). The lockfile's sha256
    is recorded in the venv, so a changed lockfile is drift and re-installs."""
    state = host.get_fact(RepoState, path=path, ref=ref, lockfile=lockfile, venv=venv)
    at_ref = state.get("head") == ref
    if at_ref and not state.get("lockfile_sha256"):
        raise OperationError(f"{path}/{lockfile} does not exist at commit {ref}")
    if at_ref and state.get("venv") and state.get("installed_sha256") == state["lockfile_sha256"]:
        host.noop(f"{venv} is installed from {lockfile} ({state['lockfile_sha256'][:12]})")
        return
    tool = "uv" if manager == "uv" else "python3"
    yield (
        f"command -v {tool} >/dev/null || "
        f"{{ echo {shlex.quote(f'gpurig: {tool} is not installed on this host')} >&2; exit 1; }}"
    )
    if not state.get("venv"):
        if manager == "uv":
            yield f"uv venv --quiet --system-site-packages {_q(venv)}"
        else:
            yield f"python3 -m venv --system-site-packages {_q(venv)}"
    yield _install(manager, path, lockfile, venv, keep)
    marker = f"{venv}/{LOCK_MARKER}"
    yield f"sha256sum < {_q(f'{path}/{lockfile}')} | cut -c1-64 > {_q(marker)}"


@deploy("Repositories")
def repos(spec: dict[str, Any]) -> None:
    declared_repos = spec.get("repos") or {}
    if declared_repos and not host.get_fact(Which, "git"):
        ensure_packages(["git"])
    for path, declared in declared_repos.items():
        ref = declared["ref"]
        repo(
            name=f"Checkout {path}",
            path=path,
            url=declared["url"],
            ref=ref,
            line_endings=declared.get("line_endings", "lf"),
        )
        python = declared.get("python")
        if python:
            python_env(
                name=f"Python environment for {path}",
                path=path,
                ref=ref,
                lockfile=python["lockfile"],
                venv=repo_venv(path, declared),
                manager=python.get("manager", "uv"),
                keep=python.get("keep", []),
            )
