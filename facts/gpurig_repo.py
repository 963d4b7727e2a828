"""What a declared checkout looks like, gathered in one command: the repo and python_env
operations decide from it whether to clone, move, renormalise, re-install or refuse; and where
its environment's declared imports resolve, for the checks."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from gpurig.facts.reader import Reader
from gpurig.facts.round_trip import BOUNDED, START, Sectioned, part_text
from gpurig.facts.safe_path import AS_ACCOUNT, SAFE_PATH, script
from gpurig.read import node_parse

GIT_CHANGES = script("git_changes.sh")
WRITERS = SAFE_PATH + script("writers.sh")
# Written into a venv after a successful install: the lockfile's sha256 and the kept packages.
LOCK_MARKER = ".gpurig-lock.sha256"
# Lines gpurig owns in the checkout's .git/info/attributes (untracked, so the tree stays clean).
LF_ATTRIBUTES = ("*.sh text eol=lf", "*.py text eol=lf")
LF_PATTERNS = ("*.sh", "*.py")


def attributes_file(path: str) -> str:
    """Shell that sets $a to the checkout's info/attributes as an absolute path; `path` is a
    shell word. git prints it relative to the checkout, or absolute (a linked worktree);
    `--path-format=absolute` would say it once, but git 2.30 (Debian 11) does not know it."""
    return (
        f"a=$(git -C {path} rev-parse --git-path info/attributes) && "
        f'case "$a" in /*) ;; *) a={path}/"$a" ;; esac'
    )


_LISTS = ("dirt", "eol_only", "local", "crlf", "attributes", "writers")


class RepoState(Reader[dict[str, Any]]):
    """The checkout at `path`: whether it is one, HEAD, origin, whether `ref` is present,
    the user's changes, local commits, CRLF scripts, gpurig's attributes and, with `lockfile`
    and `venv`, the lockfile's sha256 and the one the venv was installed from. `writers`: who
    can change the checkout and the environment, or where they would be made (writers.sh), so
    the converge never runs git, uv or pip as root in what another account can change."""

    shell_executable = "sh"

    def command(
        self, path: str, ref: str, lockfile: str | None = None, venv: str | None = None
    ) -> str:
        p, r = shlex.quote(path), shlex.quote(ref)
        patterns = " ".join(shlex.quote(x) for x in LF_PATTERNS)
        venv_writers = f"; writers {shlex.quote(venv)}" if venv else ""
        lines = [
            GIT_CHANGES,
            WRITERS,
            f"p={p}",
            "T=$(printf '\\t')",
            f'w=$(git_writers "$p"; writers "$p"{venv_writers})',
            'printf "%s\\n" "$w" | sed -n "s/^./writers$T&/p"',
            'if [ ! -e "$p" ]; then echo "exists${T}0"; exit 0; fi',
            'echo "exists${T}1"',
            # As root, no git at all where another account can change what git reads.
            '[ "$(id -u)" != 0 ] || [ -z "$(printf "%s\\n" "$w" | grep -vx 0)" ] || exit 0',
            # ... and there, git runs in the checkout as walked: nobody can re-point it.
            '[ "$(id -u)" != 0 ] || { walk "$p" && p=$CHECKED; } || exit 0',
            'if [ ! -e "$p/.git" ]; then echo "checkout${T}0"; exit 0; fi',
            'top=$(git -C "$p" rev-parse --show-toplevel 2>/dev/null)',
            'real=$(cd "$p" 2>/dev/null && pwd -P)',
            'if [ -z "$top" ] || [ "$top" != "$real" ]; then echo "checkout${T}0"; exit 0; fi',
            'echo "checkout${T}1"',
            'echo "head${T}$(git -C "$p" rev-parse --verify -q HEAD)"',
            'echo "origin${T}$(git -C "$p" remote get-url origin 2>/dev/null)"',
            f'if git -C "$p" cat-file -e {r}^{{commit}} 2>/dev/null; '
            f'then echo "has_ref${{T}}1"; pin={r}; else echo "has_ref${{T}}0"; pin=; fi',
            'git_changes "$p"',
            # Commits only this checkout has: on a local branch or HEAD, on no remote, no tag,
            # and not behind the pin.
            'git -C "$p" log --format="local%x09%h %s" HEAD --branches --not --remotes --tags'
            " $pin 2>/dev/null",
            f'git -C "$p" ls-files --eol -- {patterns} '
            '| sed -n "s/^[^$T]*w\\/crlf[^$T]*$T/crlf$T/p"',
            attributes_file('"$p"'),
            '[ -f "$a" ] && sed "s/^/attributes$T/" "$a"',
        ]
        if lockfile:
            lock = shlex.quote(f"{path}/{lockfile}")
            lines.append(
                f'[ -f {lock} ] && echo "lockfile_sha256${{T}}$(sha256sum < {lock} | cut -c1-64)"'
            )
        if venv:
            v = shlex.quote(venv)
            marker = shlex.quote(f"{venv}/{LOCK_MARKER}")
            lines += [
                f'[ -x {v}/bin/python ] && echo "venv${{T}}1"',
                f'[ -f {marker} ] && echo "installed${{T}}$(sed -n 1p {marker})"',
            ]
        lines.append("exit 0")
        return "\n".join(lines)

    def process(self, output: list[str]) -> dict[str, Any]:
        state: dict[str, Any] = {key: [] for key in _LISTS}
        for line in output:
            key, _, value = line.partition("\t")
            if key in _LISTS:
                state[key].append(value)
            elif key in ("exists", "checkout", "has_ref", "venv"):
                state[key] = value == "1"
            elif key:
                state[key] = value or None
        return state


ENV_IMPORTS = script("env_imports.sh")


def _clean_path(path: str) -> str:
    if not path.startswith("/") or any(ord(c) < 32 or c == "\x7f" for c in path):
        raise ValueError(f"imports: not an absolute path without control characters: {path!r}")
    return path


class EnvImports(Sectioned[dict[str, Any]]):
    """Where each named module resolves for a declared environment's own python started in
    the checkout (env_imports.sh): {python, ran, run_as, refused, report, error}. As root it
    runs only as the one account able to change what it executes (`refused` says why not);
    `report` is None with `error` when the environment printed something else."""

    def command(self, checkout: str, venv: str, modules: Sequence[str]) -> str:
        names = list(modules)
        bad = [name for name in names if not node_parse.MODULE_NAME.fullmatch(name)]
        if bad or not names:
            raise ValueError(f"imports: not top-level module names: {bad or names!r}")
        args = [_clean_path(checkout), _clean_path(venv), *names]
        return (
            f"{START}\nset -- {shlex.join(args)}\n{BOUNDED}\n{WRITERS}\n"
            f"AS_ACCOUNT_SH={shlex.quote(AS_ACCOUNT)}\n{ENV_IMPORTS}"
        )

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        run_as, out = part_text(parts, "run_as"), part_text(parts, "report")
        ran = part_text(parts, "ran") == "yes"
        report, error = None, None
        if ran and not out:
            error = "the environment's python printed nothing"
        elif ran:
            try:
                report = node_parse.parse_imports_report(out)
            except ValueError as exc:
                error = str(exc)
        return {
            "python": part_text(parts, "python"),
            "ran": ran,
            "run_as": int(run_as) if run_as and run_as.isdigit() else None,
            "refused": part_text(parts, "refused"),
            "report": report,
            "error": error,
        }
