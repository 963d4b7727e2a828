"""Leftovers the pre-launch cleanup may remove, each fact listing candidates with their sizes
so the operation can say what it freed and do nothing when nothing is there."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from gpurig.facts.reader import Reader
from gpurig.facts.round_trip import BOUNDED
from gpurig.spec.pattern import lazy

TAB = "T=$(printf '\\t')"
# As root these read places any account writes (/tmp): a FIFO or a leased file swapped in
# after a test, a FUSE mount, a huge tree. So nothing here stats or opens a candidate in the
# shell itself: each step is its own bounded process (BOUNDED: killed at its timeout), files
# are opened non-blocking and without following a symlink, and a candidate is the one
# `find -maxdepth 0` names by its type (and owner, where GPURIG_MINE asks for the caller's).
CANDIDATES = "\n".join(
    [
        TAB,
        BOUNDED,
        'mine="" && [ -n "${GPURIG_MINE-}" ] && mine="-user $(id -u)"',
        'is() { [ -n "$(bounded find "$2" -maxdepth 0 -type "$1" $mine 2>/dev/null)" ]; }',
    ]
)
# Bracketed first letters: the pattern does not match the shell that runs pgrep.
RAY_PROCESSES = "[r]ay::|[r]aylet|[g]cs_server"


# Names on the host are chosen by whoever can write there: a row is used only when it has the
# shape this fact prints, and every path only when it is a plain name inside the place it was
# looked for (no control characters, no `..`, nothing a newline or a tab could have forged).
_PLAIN = r"[^\x00-\x1f\x7f/]+"
SESSION = lazy(rf"/tmp/ray/session_{_PLAIN}")
CORE_NAME = lazy(r"core(\.[0-9]+)?")
FINDER = lazy(rf"(/{_PLAIN})+/lib/python3[.0-9]*/site-packages/__editable___{_PLAIN}_finder\.py")
PTH = lazy(rf"(/{_PLAIN})+/lib/python3[.0-9]*/site-packages/__editable__\.{_PLAIN}\.pth")
CACHE = lazy(rf"(/{_PLAIN})*/\.cache/flashinfer")


def _rows(output: list[str]) -> list[list[str]]:
    return [line.split("\t") for line in output if line]


def plain_path(path: str) -> bool:
    """Absolute, without control characters, empty, `.` or `..` parts."""
    parts = path.split("/")
    return (
        path.startswith("/")
        and not any(ord(c) < 32 or ord(c) == 127 for c in path)
        and all(part not in ("", ".", "..") for part in parts[1:])
    )


def _session(path: str) -> bool:
    return bool(SESSION.fullmatch(path)) and plain_path(path)


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


class RaySessions(Reader[dict[str, Any]]):
    """Ray processes running, the session `session_latest` points to, and every
    `/tmp/ray/session_*` directory with its size in KiB."""

    @staticmethod
    def default() -> dict[str, Any]:
        """pyinfra hands an empty output to default(), not process()."""
        return {"running": [], "latest": None, "sessions": {}}

    def command(self) -> str:
        return "\n".join(
            [
                CANDIDATES,
                'command -v pgrep >/dev/null || echo "running${T}pgrep is not installed"',
                f'pgrep -af {shlex.quote(RAY_PROCESSES)} | sed "s/^/running$T/"',
                "is d /tmp/ray || exit 0",
                'echo "latest${T}$(bounded readlink -f /tmp/ray/session_latest)"',
                "for d in /tmp/ray/session_*; do",
                '  is d "$d" || continue',
                '  echo "session${T}$(bounded du -skx "$d" | cut -f1)${T}$d"',
                "done",
                "exit 0",
            ]
        )

    def process(self, output: list[str]) -> dict[str, Any]:
        found = self.default()
        for row in _rows(output):
            if row[0] == "running" and len(row) >= 2:
                found["running"].append("\t".join(row[1:]))  # shown, never used as a path
            elif row[0] == "latest" and len(row) == 2:
                found["latest"] = row[1] if SESSION.fullmatch(row[1]) else None
            elif row[0] == "session" and len(row) == 3 and _digits(row[1]) and _session(row[2]):
                found["sessions"][row[2]] = int(row[1])
        return found


class CoreFiles(Reader[dict[str, int]]):
    """Core files (`core`, `core.<digits...>`) directly in `dirs`: regular files whose ELF
    header says ET_CORE; path -> bytes. Anything else with such a name is not one."""

    @staticmethod
    def default() -> dict[str, int]:
        return {}

    def command(self, dirs: Sequence[str]) -> str:
        self._dirs = [d.rstrip("/") or "/" for d in dirs]  # process() keeps paths inside them
        elf = "7f454c46" + "?" * 24  # magic, class, data, version, ABI, padding
        return "\n".join(
            [
                CANDIDATES,
                f"for d in {' '.join(shlex.quote(d) for d in dirs)}; do",
                '  for f in "$d"/core "$d"/core.[0-9]*; do',
                '    is f "$f" || continue',
                '    magic=$(bounded dd if="$f" bs=18 count=1 iflag=nonblock,nofollow 2>/dev/null '
                "| od -An -tx1 | tr -d ' \\n')",
                f"    case $magic in {elf}0400|{elf}0004) "
                f'echo "$(bounded stat -c %s -- "$f")${{T}}$f" ;; esac',
                "  done",
                "done",
                "exit 0",
            ]
        )

    def process(self, output: list[str]) -> dict[str, int]:
        return {
            row[1]: int(row[0])
            for row in _rows(output)
            if len(row) == 2 and _digits(row[0]) and plain_path(row[1])
            and (row[1].rsplit("/", 1)[0] or "/") in getattr(self, "_dirs", ())
            and CORE_NAME.fullmatch(row[1].rsplit("/", 1)[1])
        }  # fmt: skip


# The host's own python3 (root's, from the fixed PATH round_trip sets for root), isolated (-I:
# no working directory, user site or PYTHON* variables on its path) and started in /, so no
# file another account placed beside it is imported; environments are only read, never run.
# Bounded: it opens files in environments their owners write (a FIFO swapped in after a test).
ISOLATED_PYTHON = (
    f"{BOUNDED}\ncommand -v python3 >/dev/null || exit 0\ncd / && bounded python3 -I -c"
)

# Reads setuptools' editable finders (MAPPING = {package: source dir}); a finder is stale
# when none of its sources exists. Prints the finder and the .pth files that import it. Only
# regular files are read, at most 1 MiB each (a FIFO or a huge file in a venv is skipped).
_FINDERS = """\
import ast, glob, os, sys
def text(path):
    if not os.path.isfile(path):
        return ""
    with open(path, errors="replace") as f:
        return f.read(1 << 20)
for venv in sys.argv[1:]:
    pattern = os.path.join(glob.escape(venv), "lib", "python*", "site-packages",
                           "__editable___*_finder.py")
    for finder in sorted(glob.glob(pattern)):
        mapping = {}
        for node in ast.parse(text(finder)).body:
            target = getattr(node, "target", None) or (getattr(node, "targets", None) or [None])[0]
            if getattr(target, "id", None) == "MAPPING":
                mapping = ast.literal_eval(node.value)
        if not mapping or any(os.path.exists(p) for p in mapping.values()):
            continue
        module = os.path.basename(finder)[:-3]
        site = os.path.dirname(finder)
        pths = [p for p in sorted(glob.glob(os.path.join(site, "__editable__.*.pth")))
                if module in text(p)]
        print("\\t".join([finder, *pths]))
"""


class EditableFinders(Reader[dict[str, list[str]]]):
    """Stale editable-install finders in the site-packages of `venvs`: finder -> the .pth
    files that load it."""

    @staticmethod
    def default() -> dict[str, list[str]]:
        return {}

    def command(self, venvs: Sequence[str]) -> str:
        self._venvs = [v.rstrip("/") for v in venvs]  # process() keeps paths inside them
        args = " ".join(shlex.quote(v) for v in venvs)
        return f"{ISOLATED_PYTHON} {shlex.quote(_FINDERS)} {args}"

    def process(self, output: list[str]) -> dict[str, list[str]]:
        return {
            row[0]: row[1:]
            for row in _rows(output)
            if FINDER.fullmatch(row[0]) and plain_path(row[0])
            and any(row[0].startswith(f"{v}/lib/") for v in getattr(self, "_venvs", ()))
            and all(PTH.fullmatch(p) and plain_path(p) and p.rsplit("/", 1)[0] ==
                    row[0].rsplit("/", 1)[0] for p in row[1:])
        }  # fmt: skip


# When flashinfer was installed, for each python: the host's own python3 finds it on its path;
# an environment's site-packages is searched without starting its interpreter (whose .pth
# files its owner writes).
_FLASHINFER = """\
import glob, importlib.machinery, importlib.util, os, sys
for python in sys.argv[1:]:
    if python == "python3":
        spec = importlib.util.find_spec("flashinfer")
    else:
        venv = os.path.dirname(os.path.dirname(python))
        sites = glob.glob(os.path.join(glob.escape(venv), "lib", "python3*", "site-packages"))
        spec = importlib.machinery.PathFinder.find_spec("flashinfer", sites)
    if spec and spec.origin:
        print("installed\\t%d\\t%s" % (os.path.getmtime(spec.origin), python))
"""


class FlashinferCache(Reader[dict[str, Any]]):
    """`~/.cache/flashinfer` (its path, size in KiB and newest mtime) and when flashinfer was
    installed for each of `pythons` (`VENV/bin/python`, or `python3`: the host's own)."""

    @staticmethod
    def default() -> dict[str, Any]:
        return {"cache": None, "installed": {}}

    def command(self, pythons: Sequence[str]) -> str:
        return "\n".join(
            [
                CANDIDATES,
                'c="$HOME/.cache/flashinfer"',
                'is d "$c" || exit 0',
                "newest=$(bounded find \"$c\" -xdev -printf '%T@\\n' | sort -n | tail -n 1)",
                'echo "cache${T}$c${T}$(bounded du -skx "$c" | cut -f1)${T}${newest%.*}"',
                f"{ISOLATED_PYTHON} {shlex.quote(_FLASHINFER)} {shlex.join(pythons)} 2>/dev/null",
                "exit 0",
            ]
        )

    def process(self, output: list[str]) -> dict[str, Any]:
        found = self.default()
        for row in _rows(output):
            if row[0] == "cache" and len(row) == 4 and _digits(row[2]) and _digits(row[3]):
                if CACHE.fullmatch(row[1]) and plain_path(row[1]):
                    found["cache"] = {"path": row[1], "kib": int(row[2]), "mtime": int(row[3])}
            elif row[0] == "installed" and len(row) == 3 and _digits(row[1]):
                found["installed"][row[2]] = int(row[1])
        return found
