"""Declared checkouts (`repos`) at pinned commits, LF scripts, and locked Python environments.
A checkout is never deleted: an endless `git clone` restart loop is often "fixed"
with `rm -rf`; here a dirty, diverged or foreign directory is refused, naming what was found
(DESIGN: safety rules)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpurig.facts.gpurig_repo import LF_ATTRIBUTES, RepoState
from gpurig.plans.change import Change
from gpurig.plans.packages import missing
from gpurig.spec.pattern import lazy
from gpurig.spec.redact import redacted
from gpurig.spec.user_scope import is_user

# An http(s) URL's userinfo (RFC 3986 3.2.1), which git sends as the HTTP credential.
_HTTP_USERINFO = lazy(r"(?P<scheme>https?://)(?P<info>[^/?#@]+)@(?P<host>[^/?#]*)")


def split_credential(url: str) -> tuple[str, str | None]:
    """(the URL without its credential, as origin records it; a git-credential-store line
    holding the credential, or None). The credential reaches git from a private file, never
    through an argv (`ps` shows those to every account) or .git/config (world-readable under
    root's umask). A user alone is a credential too (a token as the user:
    https://ghp_...@github.com): it is sent with an empty password."""
    found = _HTTP_USERINFO.match(url)
    if not found:
        return url, None
    user, _, password = found["info"].partition(":")
    line = f"{found['scheme']}{user}:{password}@{found['host']}"
    return f"{found['scheme']}{found['host']}{url[found.end() :]}", line


def env_marker(lockfile_sha256: str, keep: list[str]) -> str:
    """What a venv records after an install: the lockfile's sha256 and the kept packages, so a
    change to either is drift."""
    return f"{lockfile_sha256} keep={','.join(sorted(keep))}"


def _refusals(path: str, url: str, state: Mapping[str, Any]) -> list[Change]:
    def refuse(change_id: str, part: str, expected: str, actual: str) -> Change:
        return Change(
            change_id,
            f"checkout {path}",
            expected,
            actual,
            f"leave {path} alone (gpurig never deletes or overwrites a checkout): "
            "commit, push or move the work, then converge",
            refused=True,
            field=part,
            data={"path": path},
        )

    shown = redacted("", url)  # https://user:token@... : compared whole, shown without it
    if not state.get("checkout"):
        not_one = "a directory that is not one"
        return [refuse("repo.not_checkout", "", f"a checkout of {shown}", not_one)]
    found = []
    if state.get("origin") not in (split_credential(url)[0], url):
        origin = redacted("", state.get("origin") or "(no origin)")
        found.append(refuse("repo.origin", "origin", shown, origin))
    if state["dirt"]:
        dirt = "; ".join(d.strip() for d in state["dirt"])
        found.append(refuse("repo.dirty", "work tree", "no uncommitted changes", dirt))
    if state["local"]:
        local = "; ".join(state["local"])
        found.append(
            refuse("repo.local_commits", "commits", "no commits missing from the remote", local)
        )
    return found


def _others(writers: list[str]) -> str | None:
    """Who besides root can change a checkout, its git directory or its environment
    (RepoState's `writers`: uids, `refused WHY`, `shared PATH`, `unknown PATH`, `linked PATH`),
    said plainly; None when root alone can."""
    said = []
    for word in writers:
        kind, _, where = word.partition(" ")
        if kind == "refused":
            said.append(where)
        elif kind == "shared":
            said.append(f"a group or other accounts may write {where}")
        elif kind == "unknown":
            said.append(f"cannot tell who may change {where} (no readlink, stat or find)")
        elif kind == "linked":
            said.append(f"{where} is a link or names a git directory elsewhere")
        elif kind != "0":
            said.append(f"uid {kind} owns it or a directory above it")
    return "; ".join(dict.fromkeys(said)) or None


def _not_roots(path: str, state: Mapping[str, Any]) -> list[Change]:
    """As root, the converge runs git, uv, pip and the environment's python in a checkout:
    never in one another account can change (a planted build backend, `.pth` or git hook
    would run as root), nor create one where another account could swap it."""
    others = _others(state.get("writers") or [])
    if others is None:
        return []
    return [
        Change(
            "repo.writable",
            f"checkout {path}",
            "the checkout, its environment and the directories above them changeable by root "
            "alone (the converge runs git, uv and pip there as root)",
            others,
            f"leave {path} alone: make root own it and the directories above it, or declare "
            "it in the owning account's own spec (scope: user)",
            refused=True,
            data={"path": path},
        )
    ]


def _python(path: str, declared: Mapping[str, Any], state: Mapping[str, Any]) -> list[Change]:
    python = declared.get("python")
    if not python:
        return []
    ref, lockfile, venv = declared["ref"], python["lockfile"], python["venv"]
    data = {"path": path, "lockfile": lockfile, "venv": venv, "manager": python["manager"],
            "keep": python["keep"], "has_venv": bool(state.get("venv"))}  # fmt: skip
    at_ref = state.get("head") == ref
    sha = state.get("lockfile_sha256")
    if at_ref and not sha:
        return [
            Change(
                "repo.lockfile_missing",
                f"checkout {path}",
                f"present at {ref[:12]}",
                "missing",
                "install no environment without its lockfile",
                refused=True,
                field=lockfile,
                data={"path": path},
            )
        ]
    wanted = env_marker(sha, python["keep"]) if at_ref and sha else "the commit's lockfile"
    installed = state.get("installed") if state.get("venv") else None
    if at_ref and installed == wanted:
        return []
    return [
        Change(
            "repo.env",
            f"environment {venv}",
            f"installed from {lockfile}: {wanted}",
            installed or "not installed by gpurig",
            f"install {lockfile} into {venv} exactly",
            data=data,
        )
    ]


def _repo(
    path: str, declared: Mapping[str, Any], state: Mapping[str, Any] | None, root: bool
) -> list[Change]:
    ref, url, lf = declared["ref"], declared["url"], declared["line_endings"] == "lf"
    data = {"path": path, "url": url, "ref": ref, "lf": lf}
    writable = _not_roots(path, state or {}) if root else []
    if writable:
        return writable
    if not state or not state.get("exists"):
        shown = redacted("", url)
        return [
            Change(
                "repo.missing",
                f"checkout {path}",
                f"a checkout of {shown} at {ref[:12]}",
                "missing",
                f"clone {shown} at {ref[:12]}",
                data=data,
            ),
            *_python(path, declared, {}),
        ]
    refused = _refusals(path, url, state)
    if refused:
        return refused
    changes = []
    if state.get("origin") != split_credential(url)[0]:
        changes.append(
            Change(
                "repo.credential",
                f"checkout {path}",
                f"origin {redacted('', url)} with its credential out of .git/config",
                "origin holds its credential in .git/config (readable by every account)",
                "remove the credential from origin (git supplies it from a private file)",
                field="origin",
                data=data,
            )
        )
    attributes = [a for a in LF_ATTRIBUTES if a not in state["attributes"]] if lf else []
    if attributes:
        changes.append(
            Change(
                "repo.attributes",
                f"checkout {path}",
                "eol=lf for *.sh and *.py",
                "not set",
                "set eol=lf in .git/info/attributes",
                field="attributes",
                data={**data, "attributes": attributes},
            )
        )
    if state.get("head") != ref:
        changes.append(
            Change(
                "repo.ref",
                f"checkout {path}",
                ref,
                state.get("head") or "no commit",
                f"check out {ref[:12]} (the tree is clean)",
                field="commit",
                data={**data, "fetch": not state.get("has_ref"), "force": bool(state["eol_only"])},
            )
        )
    if lf and state["crlf"]:
        changes.append(
            Change(
                "repo.crlf",
                f"checkout {path}",
                "LF line endings",
                ", ".join(state["crlf"]),
                "rewrite the scripts with LF",
                field="line endings",
                data=data,
            )
        )
    return changes + _python(path, declared, state)


def plan(spec: Mapping[str, Any], read: Callable[..., Any]) -> list[Change]:
    repos = spec["repos"]
    if not repos:
        return []
    changes = missing(["git"], read, "for the declared repos", user=is_user(spec))
    for path, declared in repos.items():
        python = declared.get("python") or {}
        state = read(
            RepoState,
            path=path,
            ref=declared["ref"],
            lockfile=python.get("lockfile"),
            venv=python.get("venv"),
        )
        changes += _repo(path, declared, state, root=not is_user(spec))
    return changes
