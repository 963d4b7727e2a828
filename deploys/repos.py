"""Declared checkouts (`repos`): clone, move to the pinned commit, LF scripts, and the locked
Python environment, for the changes gpurig.plans.repos finds; a refusal fails the host."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pyinfra.api import deploy, operation

from gpurig.deploys import writes
from gpurig.deploys.changes import start
from gpurig.deploys.packages import install
from gpurig.deploys.snapshot import read
from gpurig.facts.gpurig_repo import (
    GIT_CHANGES,
    LF_ATTRIBUTES,
    LF_PATTERNS,
    LOCK_MARKER,
    attributes_file,
)
from gpurig.facts.safe_path import SAFE_PATH
from gpurig.plans import repos as plan
from gpurig.plans.change import Change
from gpurig.plans.repos import env_marker, split_credential

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


# The checkout and its environment as the commands name them: shell variables that _guarded
# sets to the walked paths (facts/safe_path.sh `checked`), so git, uv, pip and python run as
# root only where root alone can change them, and on the path that was checked.
P, V = '"$P"', '"$V"'


def _guarded(data: dict[str, Any], command: str, cleanup: str = "") -> str:
    """`command` after the walk of the checkout (and its environment): as root, it runs only
    where root alone can change both, else the host's run fails saying why (after `cleanup`)."""
    walks = [f"P=$(checked {_q(data['path'])})"]
    if data.get("venv"):
        walks.append(f"V=$(checked {_q(data['venv'])})")
    return f"{SAFE_PATH}\n{' && '.join(walks)} || {{ {cleanup}exit 1; }}\n{command}"


def _add_attributes(lines: Sequence[str]) -> str:
    """Append gpurig's lines to the checkout's info/attributes (not tracked, so no dirt)."""
    text = "".join(f"{line}\n" for line in lines)
    return (
        f'{attributes_file(P)} && mkdir -p "$(dirname "$a")" && '
        f'printf %s {shlex.quote(text)} >> "$a"'
    )


def _normalise() -> str:
    """Rewrite CRLF scripts that carry an eol=lf attribute with LF, naming each one. Only run
    on a tree without the user's changes; files git would call modified stay equal to the
    commit but for the CRs (facts/git_changes.sh tells them apart)."""
    return (
        f"cd {P} && T=$(printf '\\t') && git ls-files --eol -- {_q(*LF_PATTERNS)} "
        '| sed -n "s/^[^$T]*w\\/crlf[^$T]*attr\\/[^$T]*eol=lf[^$T]*$T//p" '
        "| while IFS= read -r f; do sed -i 's/\\r$//' \"$f\" && "
        'echo "gpurig: LF line endings: $f"; done'
    )


def _install(manager: str, lockfile: str, keep: Sequence[str]) -> str:
    if manager == "uv":
        skip = "".join(f" --no-install-package {shlex.quote(k)}" for k in keep)
        return f"cd {P} && UV_PROJECT_ENVIRONMENT={V} uv sync --locked --quiet{skip}"
    python, lock = f"{V}/bin/python", f"{P}/{_q(lockfile)}"
    requirements = lock
    prefix = ""
    if keep:
        requirements = f"{V}/.gpurig-requirements.txt"
        script = shlex.quote(_FILTER)
        prefix = f"{python} -c {script} {lock} {_q(*keep)} > {requirements} && "
    return (
        # --force-reinstall: a changed lockfile is installed and hash-checked whole; pip checks
        # no hash of a package it finds already installed.
        f"{prefix}cd {P} && {python} -m pip install --quiet "
        "--disable-pip-version-check --require-hashes --no-deps --force-reinstall "
        f"-r {requirements}"
    )


def _remote(data: dict[str, Any], command: Callable[[str], str]) -> Iterator[object]:
    """`command(git)` for a git that talks to `url`'s remote. A credential in the URL is
    uploaded into a private stage (0700, its file 0600) and read there by git's own store
    helper, the only helper asked; the stage is removed right after, whatever the outcome."""
    _, credential = split_credential(data["url"])
    if credential is None:
        yield _guarded(data, command("git"))
        return
    stage, steps = writes.stage(f"{credential}\n".encode())
    yield from steps
    helper = shlex.quote(f"credential.helper=store --file={stage}/upload")
    git = f"git -c credential.helper= -c {helper}"
    gone = f"rm -rf {shlex.quote(stage)}; "
    yield _guarded(data, f"{command(git)}; rc=$?; {gone}exit $rc", cleanup=gone)


def _checkout(data: dict[str, Any]) -> Iterator[object]:
    path, ref = data["path"], data["ref"]
    if data["fetch"]:
        yield from _remote(data, lambda git: f"{git} -C {P} fetch --quiet --tags origin")
    if data["force"]:
        # git calls gpurig's own LF rewrites local changes and will not switch over them;
        # --force is safe only while the user has none, checked again in the same shell.
        refuse = shlex.quote(f"gpurig: {path} changed meanwhile; left alone")
        yield _guarded(
            data,
            f"{GIT_CHANGES}\nif git_changes {P} | grep -q '^dirt'; "
            f"then echo {refuse} >&2; exit 1; fi\n"
            f"git -C {P} checkout --quiet --force --detach {_q(ref)}",
        )
    else:
        yield _guarded(data, f"git -C {P} checkout --quiet --detach {_q(ref)}")
    if data["lf"]:
        yield _guarded(data, _normalise())


def _clone(data: dict[str, Any]) -> Iterator[object]:
    origin = split_credential(data["url"])[0]  # what .git/config records
    yield from _remote(
        data,
        lambda git: (
            f'mkdir -p -- "$(dirname -- {P})" && '
            f"{git} clone --quiet --no-checkout -- {_q(origin)} {P}"
        ),
    )
    if data["lf"]:
        yield _guarded(data, _add_attributes(LF_ATTRIBUTES))
    yield _guarded(data, f"git -C {P} checkout --quiet --detach {_q(data['ref'])}")
    if data["lf"]:
        yield _guarded(data, _normalise())


def _environment(data: dict[str, Any]) -> Iterator[str]:
    lockfile, manager = data["lockfile"], data["manager"]
    tool = "uv" if manager == "uv" else "python3"
    yield (
        f"command -v {tool} >/dev/null || "
        f"{{ echo {shlex.quote(f'gpurig: {tool} is not installed on this host')} >&2; exit 1; }}"
    )
    if not data["has_venv"]:
        if manager == "uv":
            yield _guarded(data, f"uv venv --quiet --system-site-packages {V}")
        else:
            yield _guarded(data, f"python3 -m venv --system-site-packages {V}")
    yield _guarded(data, _install(manager, lockfile, data["keep"]))
    marker = f"{V}/{LOCK_MARKER}"
    keep = shlex.quote(env_marker("", data["keep"]))
    yield _guarded(data, f'echo "$(sha256sum < {P}/{_q(lockfile)} | cut -c1-64)"{keep} > {marker}')


def commands(change: Change) -> Iterator[object]:
    data = dict(change.data)
    if change.id == "packages.missing":
        yield install(change)
    elif change.id == "repo.missing":
        yield from _clone(data)
    elif change.id == "repo.credential":
        origin = split_credential(data["url"])[0]
        yield _guarded(data, f"git -C {P} remote set-url origin {_q(origin)}")
    elif change.id == "repo.attributes":
        yield _guarded(data, _add_attributes(data["attributes"]))
    elif change.id == "repo.ref":
        yield from _checkout(data)
    elif change.id == "repo.crlf":
        yield _guarded(data, _normalise())
    elif change.id == "repo.env":
        yield from _environment(data)


ENVIRONMENT = ("repo.env", "repo.lockfile_missing")


def _changes(spec: dict[str, Any], path: str, environment: bool) -> list[Change]:
    """The plan's changes for the checkout at `path`, or for its environment."""
    return [
        c for c in plan.plan(spec, read)
        if c.data.get("path", path) == path and (c.id in ENVIRONMENT) == environment
        and (c.id != "packages.missing" or path == next(iter(spec["repos"])))
    ]  # fmt: skip


@operation()
def checkout(spec: dict[str, Any], path: str):
    """Clone or move the checkout at `path` to its commit with LF scripts; never over the
    user's changes."""
    changes = _changes(spec, path, environment=False)
    if start(changes, f"{path} is at its commit"):
        moved = any(c.id == "repo.ref" for c in changes)
        for change in changes:
            if change.id == "repo.crlf" and moved:
                continue  # the move rewrites line endings already
            yield from commands(change)


@operation()
def environment(spec: dict[str, Any], path: str):
    """Install the checkout's lockfile into its environment, exactly."""
    changes = _changes(spec, path, environment=True)
    if start(changes, f"the environment of {path} is installed from its lockfile"):
        for change in changes:
            yield from commands(change)


@deploy("Repositories")
def repos(spec: dict[str, Any]) -> None:
    for path, declared in spec["repos"].items():
        checkout(name=f"Checkout {path}", spec=spec, path=path)
        if declared.get("python"):
            environment(name=f"Python environment for {path}", spec=spec, path=path)
