"""Every fact a spec needs, read in one remote command (DESIGN: one round trip per host).

The plans read state through a `read(FactClass, **kwargs)` callable. Running the plans once
with a `Recorder` lists exactly which reads a spec needs; `HostState` runs all their commands
as one shell script, each after a marker line (in a subshell where it could change what the
next one sees: `shares_shell`), and hands each section to its own
fact's `process()`. The drift check judges that snapshot; the converge's operations read it
through `Snapshot.get` until something on the host has changed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from gpurig.facts.reader import Reader
from gpurig.facts.safe_path import SAFE_PATH
from gpurig.root_env import ROOT_PATH

Read = tuple[type[Reader], dict[str, Any]]
T = TypeVar("T")


def read_key(cls: type[Reader], kwargs: dict[str, Any]) -> str:
    """A stable key for one read: the fact's name and its arguments."""
    return f"{cls.__module__}.{cls.__name__}:{json.dumps(kwargs, sort_keys=True, default=str)}"


class Unreadable(Exception):
    """A section's output could not be parsed: the host printed something unexpected."""


class FactFailed(Exception):
    """A fact's process() failed other than by refusing the host's output (a KeyError, a
    TypeError): a bug in gpurig, reported as gpurig's own, never as the host's output."""


# What a parser raises when it refuses what the host printed (xml.etree's ParseError is a
# SyntaxError); anything else a fact raises is its own bug.
REFUSALS = (ValueError, SyntaxError)


class Recorder:
    """A reader that answers each fact's default() and remembers what was asked, in order."""

    def __init__(self) -> None:
        self.reads: dict[str, Read] = {}

    def __call__(self, cls: type[Reader], **kwargs: Any) -> Any:
        self.reads.setdefault(read_key(cls, kwargs), (cls, kwargs))
        return cls().default()


def required_reads(plan: Callable[[Callable[..., Any]], object]) -> list[Read]:
    """The reads `plan(read)` makes; plans read by the spec alone, never by what they found."""
    recorder = Recorder()
    plan(recorder)
    return list(recorder.reads.values())


# Each run's nonce: a fresh random UUID from the kernel, read by the shell's own `read` into a
# variable it never exports, and printed first (`START`: the run's, and each Sectioned fact's
# own). It is in no command line, environment or file, so nothing another account runs or
# reads (/proc shows command lines: a file named after a nonce sent in the command once forged
# the probe) can print a marker.
# No process per section either: a `sed` prefixing each section's lines cost a node contract
# more than all its tools (it runs at every job start, on every node).
NONCE = "--gpurig-nonce"
# The nonce line alone: a Sectioned fact inside HostState's script prints the run's own nonce
# (as secret as a fresh one) instead of reading a fresh one in a subshell of its own.
NONCE_LINE = f"printf '%s %s\\n' {NONCE} \"$gpurig_nonce\""
# Unset first: a value (or an export) from the caller's environment is not this run's.
START = (
    "unset gpurig_nonce; read -r gpurig_nonce 2>/dev/null </proc/sys/kernel/random/uuid"
    ' || gpurig_nonce=$(od -An -N16 -tx1 /dev/urandom 2>/dev/null | tr -d " \\n")\n'
    f'[ -n "$gpurig_nonce" ] || exit 0\n{NONCE_LINE}'
)


def _marker(kind: str, label: str) -> str:
    return f"printf '\\n--gpurig-{kind}-%s %s\\n' \"$gpurig_nonce\" {label}"


def section(kind: str, label: str, body: str) -> str:
    """Shell printing the marker of `kind` (a word) with this run's nonce and `label` (a shell
    word) on a line of its own, then the body's output; after `START`. It exits 0: a tool that
    failed is a value for the parser, not a failed read. The body runs in a subshell, or in
    braces where it can change nothing a later body sees (`shares_shell`)."""
    if shares_shell(body):
        return f"{_marker(kind, label)}\n{{\n{body}\n}} </dev/null || true"
    return f"{_marker(kind, label)}\n(\n{body}\n) </dev/null || true"


# A subshell costs a fork (0.2-0.3 ms), and a node contract's read has about 50 sections: a
# body runs in the read's own shell where nothing in it can end that shell or change what a
# later body sees. Any of these means a subshell: a builtin that ends the shell or changes its
# state (`return` outside a one-line function, `local` outside any, ends dash), an assignment
# to a variable but the body's own lower-case ones (`IFS=` just before a `read`), a `read` into
# an upper-case name, a function but gpurig's own, an expansion that assigns, a job left in the
# background, and what ends a non-interactive shell on an error (POSIX 2.8.1, "Consequences of
# Shell Errors"): an arithmetic expansion (a value the host printed can make it one), a
# special builtin such as `:` with a redirection.
# Conservative: a builtin's name counts wherever it stands as a word (in a comment, a string or
# a `$(...)` too: one fork more). What a section inside the body put in a subshell
# stays there. A body's lower-case variables may outlive it: each body sets what it reads, as
# it must where it runs alone (a caller's environment may hold any lower-case name). String
# methods, not a tokenizer or regular expressions: this runs over every section at each
# contract's start, where compiling a pattern costs more than the search.
_CHANGES_SHELL = (
    "exit", "cd", "pushd", "popd", "exec", "set", "unset", "shift", "trap", "umask", "export",
    "readonly", "local", "declare", "typeset", "let", "eval", "source", ".", "times", "ulimit",
    "alias", "hash", "getopts", "enable", "builtin", "shopt", "mapfile", "readarray",
    "printf -v", "$((", "((",
)  # fmt: skip
_SEPARATE = str.maketrans(";&|(){}`\"'<>", " " * 12)
_OWN_FUNCTIONS = ("walk()", "checked()", "bounded()")
_SECTION_OPENS = "printf '\\n--gpurig-"
_SECTION_CLOSE = ") </dev/null || true"


def shares_shell(body: str) -> bool:
    """Whether `body` may run in the read's own shell: nothing in it (outside the sections it
    holds that run in subshells) ends that shell or changes what a later body sees."""
    lines = _own_lines(body)
    if lines is None:
        return False
    text = "\n".join(lines)
    if any(word in text and _has_word(text, word) for word in _CHANGES_SHELL):
        return False
    if "${" in text and any(_assigning_expansion(x) for x in text.split("${")[1:]):
        return False
    if "return" in text and not all(_one_line_function(x) for x in lines if "return" in x):
        return False
    if "read" in text and any(_reads_into_other(x) for x in lines if "read" in x):
        return False
    if "()" in text and not all(_own_function(w) for w in text.split() if "()" in w):
        return False
    if ":" in text and any(_redirected_colon(x) for x in lines if ":" in x):
        return False
    for cut in ("&&", ">&", "<&", "&>"):
        text = text.replace(cut, "")
    if "&" in text:  # a job left in the background
        return False
    assigning = (x.translate(_SEPARATE).split() for x in lines if "=" in x)
    return not any(_assigns_other(w, lines) for words in assigning for w in words if "=" in w)


def _has_word(text: str, word: str) -> bool:
    """Whether `word` stands in `text` as a word of its own: not inside a name (`reset`,
    `local_errors`), a path (`/usr/local`), an option (`is-enabled`) or `$exit`; `$((` and `((`
    wherever they are."""
    start = text.find(word)
    while start >= 0:
        end = start + len(word)
        before, after = text[start - 1 : start] or " ", text[end : end + 1] or " "
        joined = (word[0].isalnum() or word == ".") and (before.isalnum() or before in "_-./$")
        joined = joined or (word[-1].isalnum() and (after.isalnum() or after in "_-."))
        if not joined and (word != "." or after in " \t"):
            return True
        start = text.find(word, start + 1)
    return False


def _commands(line: str) -> list[str]:
    """The line cut at `;`, `&` and `|`: its commands, near enough for the checks above."""
    return line.replace("&", ";").replace("|", ";").split(";")


def _redirected_colon(line: str) -> bool:
    """Whether `line` runs `:` with a redirection (an error in it ends the shell)."""
    for command in _commands(line):
        words = command.split()
        if ":" in words[:2] and ("<" in command or ">" in command):  # after `then`, `do` too
            return True
    return False


def _name(word: str) -> bool:
    return word.isascii() and word.isidentifier()


def _own_variable(name: str) -> bool:
    return _name(name) and "a" <= name[0] <= "z" and name == name.lower() and name != "gpurig_nonce"


def _own_function(word: str) -> bool:
    name = word.removesuffix("()")
    return word in _OWN_FUNCTIONS or (
        name != word and _name(name) and name.startswith(("gpurig_", "w_"))
    )


def _assigning_expansion(after: str) -> bool:
    """Whether the text after a `${` assigns (`${x=y}`, `${x:=y}`) or may end the shell
    (`${x?}`, `${x:?}`)."""
    rest = after.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
    return rest.removeprefix(":")[:1] in ("=", "?")


def _one_line_function(line: str) -> bool:
    """`name() { ...; }` on one line: a `return` in it returns from the function."""
    name, opens, _ = line.partition("() { ")
    return bool(opens) and _name(name) and line.removesuffix(" 2>/dev/null").endswith("}")


def _reads_into_other(line: str) -> bool:
    """Whether a `read` in `line` sets a variable that is not the body's own."""
    for command in _commands(line):
        words = command.split()
        if "read" in words:
            names = (w.split("<")[0].split(">")[0] for w in words[words.index("read") + 1 :])
            if any(_name(n) and not _own_variable(n) and n != "_" for n in names):
                return True
    return False


def _assigns_other(word: str, lines: list[str]) -> bool:
    """Whether `word` assigns a variable that is not the body's own."""
    name = word.partition("=")[0]
    if not _name(name):
        return False  # a test's `!=`, an option's `--x=y`
    if name == "IFS":  # only just before a `read`, for it alone
        return not all(_ifs_before_read(line) for line in lines if "IFS=" in line)
    return not _own_variable(name)


def _ifs_before_read(line: str) -> bool:
    return all(part.partition(" ")[2].startswith("read ") for part in line.split("IFS=")[1:])


def _own_lines(body: str) -> list[str] | None:
    """The body's lines outside the sections in it that run in subshells (None: unbalanced)."""
    if f"\n{_SECTION_CLOSE}" not in body:
        return body.split("\n")
    depth, before, own = 0, "", []
    for line in body.split("\n"):
        opens = line == "(" and before.startswith(_SECTION_OPENS)
        if depth:
            depth += opens - (line == _SECTION_CLOSE)
        elif opens:
            depth = 1
        else:
            own.append(line)
        before = line
    return own if depth == 0 else None


def step(kind: str, label: str, body: str) -> str:
    """`section()` whose body's exit status the shell prints after the body's output, in a
    section of its own, `label.exit` (a plain word `label`): what the body printed can pass
    for neither its status nor another section (read back with `exit_status`)."""
    status = f"{_marker(kind, f'{label}.exit')}\nprintf '%s\\n' \"$rc\""
    return section(kind, label, f"(\n{body}\n)\nrc=$?\n{status}")


def exit_status(text: str | None) -> int | None:
    """A `step()`'s status from its `label.exit` section's text; None where the step did not
    run or was cut short (no status printed)."""
    value = (text or "").strip()
    return int(value) if re.fullmatch(r"[0-9]{1,3}", value) else None


def sections(output: list[str], kind: str) -> dict[str, list[str]]:
    """Output split at this run's markers of `kind` ({label or "": lines}). The run's nonce is
    on the first nonce line, printed before any command ran; lines before the first marker, and
    the empty line each marker's printf starts with, are no section's."""
    nonce = next((line[len(NONCE) + 1 :] for line in output if line.startswith(f"{NONCE} ")), "")
    if not 32 <= len(nonce) <= 36 or nonce.strip("0123456789abcdef-"):  # [0-9a-f-]{32,36}
        return {}
    marker = f"--gpurig-{kind}-{nonce}"
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output:
        if line == marker or line.startswith(f"{marker} "):
            if current and not current[-1]:
                current.pop()
            current = found.setdefault(line[len(marker) + 1 :], [])
        elif current is not None:
            current.append(line)
    return found


# A shell function bounding a call that can hang (a wedged engine, a stuck GPU, a FIFO or a
# FUSE file another account put in root's way) where coreutils' timeout exists (a host
# without it still answers): 20 s, or what HostState's `bound` allows (a node contract's
# mode); SIGKILL a second after SIGTERM, for a call that ignores TERM.
BOUNDED = (
    "bounded() { if command -v timeout >/dev/null 2>&1; "
    'then timeout -k 1 "${GPURIG_BOUND:-20}" "$@"; else "$@"; fi; }'
)


# The shell's effective uid from /proc/self/status with its own `read` (`id -u` where there
# is no /proc): no process for a question the shell can answer.
EUID = (
    'gpurig_euid() { while read -r k _ e _; do [ "$k" != Uid: ] || { echo "$e"; return; }; '
    "done </proc/self/status; command -p id -u; } 2>/dev/null"
)


# `gpurig_lines FILE` prints a small file's lines and `gpurig_field FILE KEY` what follows KEY
# on its line, with the shell's own `read`: a /proc, /sys or /etc file costs no process (a fork
# and an exec cost a node contract's read more than the file itself).
LINES = (
    'gpurig_lines() { while IFS= read -r l || [ -n "$l" ]; do printf \'%s\\n\' "$l"; '
    'done < "$1"; }\n'
    'gpurig_field() { while read -r k v; do [ "$k" != "$2" ] || printf \'%s\\n\' "$v"; '
    'done < "$1"; }'
)


def part_text(parts: Mapping[str, str], label: str) -> str | None:
    """A part's text stripped, or None when it printed nothing (or did not run)."""
    return (parts.get(label) or "").strip() or None


class Sectioned(Reader[T]):
    """A fact whose command prints several outputs, each behind its own marker (the run's
    secret nonce: `section()`), so one tool's output can never pass for another's.
    `parse({label: text})` types them; `parse({})` is what a host without any of the tools
    answers, and the default."""

    def sectioned(self, parts: Mapping[str, str]) -> str:
        """The command printing each part's output under its label (a shell word)."""
        return "\n".join([START, *(section("part", label, body) for label, body in parts.items())])

    def split(self, output: list[str]) -> dict[str, str]:
        """{label: the part's text} for the parts `sectioned()` printed."""
        return {label: "\n".join(lines) for label, lines in sections(output, "part").items()}

    def process(self, output: list[str]) -> T:
        return self.parse(self.split(output))

    def default(self) -> T:
        return self.parse({})

    @staticmethod
    def parse(parts: Mapping[str, str]) -> T:
        raise NotImplementedError


def root_tool(name: str) -> str | None:
    """The program `name` in the system's directories (ROOT_PATH), as shutil.which finds it
    there (an executable file), or None: what root runs here is never found through a
    caller's PATH. Without shutil, which a node contract would load for this alone."""
    for directory in ROOT_PATH.split(":"):
        path = os.path.join(directory, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def two_lanes(left: list[str], right: list[str]) -> str:
    """The sections in two lanes that run at once: the left one's output waits in a pipe (64
    KiB; past that its writer waits) and follows the right one's. The sections are read by
    their markers, in any order, each body sets what it reads and reads nothing from its
    standard input, so the lanes share nothing but the pipe: a host with two CPUs answers in
    about half the time (the read of a full spec on a sandbox host, 130-155 ms, waited on its
    slowest sections one after the other: python3 for the secrets' digests, git for a
    checkout)."""
    if not left or not right:
        return "\n".join(left + right)
    return "(\n{}\n) | {{\n{}\ncat\n}}".format("\n".join(left), "\n".join(right))


class HostState(Reader[dict[str, Any]]):
    """The outputs of many facts from one command: {read_key: value or Unreadable}."""

    # By its path: pyinfra's command starts it by name, which a PATH entry another account
    # may write could answer (a local read as root keeps the caller's PATH until the script
    # sets the system's own).
    shell_executable = "/bin/sh"

    @staticmethod
    def default() -> dict[str, Any]:
        return {}

    def command(self, reads: Sequence[Read], bound: int | None = None) -> str:
        # Each fact's own instance parses its section: some keep what command() was given.
        self._facts = [(cls(), cls, kwargs) for cls, kwargs in reads]
        # As root, the system's PATH and `/` as the working directory: a caller's PATH entry
        # or directory another account may write is no place to start tools from (`command
        # -p`: id from the shell's standard path too). No BASH_ENV or ENV, and a HOME that is
        # not root's alone (another account owns it or may write it) replaced by root's own:
        # the login shell LoginShell starts would otherwise run a file the caller named, or
        # another account's profile, as root.
        # HOME is walked (facts/safe_path.sh): a root-owned link in another account's
        # directory is hers to re-point, so only a HOME root alone can change counts, at its
        # walked path.
        root = (
            f"PATH={ROOT_PATH} && export PATH && unset BASH_ENV ENV && "
            '{ { walk "${HOME:-/nonexistent}" && [ -z "$OWNER" ] && [ -d "$CHECKED" ] && '
            "HOME=$CHECKED; } || HOME=~root; export HOME; } && cd /"
        )
        parts = [START, EUID, SAFE_PATH, f'[ "$(gpurig_euid)" = 0 ] && {root}']
        if bound is not None:  # seconds for each call a fact bounds (BOUNDED)
            parts.insert(0, f"GPURIG_BOUND={int(bound)}")
        lanes: tuple[list[str], list[str]] = ([], [])
        for index, (fact, _, kwargs) in enumerate(self._facts):
            command = fact.command(**kwargs)
            if command.startswith(f"{START}\n"):  # a Sectioned fact: this run's nonce serves
                command = NONCE_LINE + command[len(START) :]
            lanes[index % 2].append(section("section", str(index), command))
        parts.append(two_lanes(*lanes))
        parts.append("exit 0")
        return "\n".join(parts)

    def process(self, output: list[str]) -> dict[str, Any]:
        parts = sections(output, "section")
        state: dict[str, Any] = {}
        for index, (fact, cls, kwargs) in enumerate(self._facts):
            lines = parts.get(str(index), [])
            while lines and not lines[-1]:
                lines.pop()
            try:
                state[read_key(cls, kwargs)] = fact.process(lines) if lines else fact.default()
            except REFUSALS as exc:  # host output is untrusted: one bad section, one error
                state[read_key(cls, kwargs)] = Unreadable(f"{cls.__name__}: {exc!r}"[:300])
            except Exception as exc:  # a bug in the fact: raised as gpurig's by whoever reads it
                failed = FactFailed(f"{cls.__name__}.process: {exc!r}"[:300])
                failed.__cause__ = exc
                state[read_key(cls, kwargs)] = failed
        return state


class Snapshot:
    """A reader over one HostState result; a read it does not hold is an error, not a guess."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def holds(self, cls: type[Reader], kwargs: dict[str, Any]) -> bool:
        return read_key(cls, kwargs) in self.values

    def __call__(self, cls: type[Reader], **kwargs: Any) -> Any:
        value = self.values[read_key(cls, kwargs)]
        if isinstance(value, (Unreadable, FactFailed)):
            raise value
        return value
