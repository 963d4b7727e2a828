"""Every fact a spec needs, read in one remote command (DESIGN: one round trip per host).

The plans read state through a `read(FactClass, **kwargs)` callable. Running the plans once
with a `Recorder` lists exactly which reads a spec needs; `HostState` runs all their commands
as one shell script, each in a subshell after a marker line, and hands each section to its own
fact's `process()`. The drift check judges that snapshot; the converge's operations read it
through `Snapshot.get` until something on the host has changed.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from gpurig.facts.reader import Reader

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


# Every line a section prints reaches us behind this prefix; a marker line never has it.
PREFIX = "|"


def section(marker: str, label: str, body: str) -> str:
    """Shell printing `MARKER LABEL` (label: a shell word), then the body's output with every
    line prefixed. No output can start a section, whatever it prints, even from someone who
    read the marker's nonce in /proc (a file named after it once forged the probe)."""
    return f"printf '\\n%s %s\\n' '{marker}' {label}\n(\n{body}\n) </dev/null | sed 's/^/{PREFIX}/'"


def sections(output: list[str], marker: str) -> dict[str, list[str]]:
    """Output split at lines `MARKER` or `MARKER LABEL` ({label or "": lines}); only prefixed
    lines are a section's (others, and lines before the first marker, are dropped)."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output:
        if line.startswith(PREFIX):
            if current is not None:
                current.append(line[len(PREFIX) :])
        elif line == marker or line.startswith(f"{marker} "):
            current = found.setdefault(line[len(marker) + 1 :], [])
    return found


# A shell function bounding a call that can hang (a wedged engine, a stuck GPU, a FIFO or a
# FUSE file another account put in root's way) where coreutils' timeout exists (a host
# without it still answers): 20 s, or what HostState's `bound` allows (a node contract's
# mode); SIGKILL a second after SIGTERM, for a call that ignores TERM.
BOUNDED = (
    "bounded() { if command -v timeout >/dev/null 2>&1; "
    'then timeout -k 1 "${GPURIG_BOUND:-20}" "$@"; else "$@"; fi; }'
)


def part_text(parts: Mapping[str, str], label: str) -> str | None:
    """A part's text stripped, or None when it printed nothing (or did not run)."""
    return (parts.get(label) or "").strip() or None


class Sectioned(Reader[T]):
    """A fact whose command prints several outputs, each behind its own marker (a per-run
    nonce, every line prefixed: `section()`), so one tool's output can never pass for
    another's. `parse({label: text})` types them; `parse({})` is what a host without any
    of the tools answers, and the default."""

    def sectioned(self, parts: Mapping[str, str]) -> str:
        """The command printing each part's output under its label (a shell word)."""
        self._marker = f"--gpurig-part-{secrets.token_hex(8)}"
        return "\n".join(section(self._marker, label, body) for label, body in parts.items())

    def split(self, output: list[str]) -> dict[str, str]:
        """{label: the part's text} for the parts `sectioned()` printed."""
        return {label: "\n".join(lines) for label, lines in sections(output, self._marker).items()}

    def process(self, output: list[str]) -> T:
        return self.parse(self.split(output))

    def default(self) -> T:
        return self.parse({})

    @staticmethod
    def parse(parts: Mapping[str, str]) -> T:
        raise NotImplementedError


# Root reads with the system's own tools: no PATH entry another account could write (a SLURM
# prolog has no PATH at all; a login's PATH may hold a user's directory).
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


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
        # The marker carries a per-run nonce, so no file or tool output can end a section early
        # by accident; pyinfra calls process() on this same instance.
        self._marker = f"--gpurig-section-{secrets.token_hex(8)}"
        # Each fact's own instance parses its section: some keep what command() was given.
        self._facts = [(cls(), cls, kwargs) for cls, kwargs in reads]
        # As root, the system's PATH and `/` as the working directory: a caller's PATH entry
        # or directory another account may write is no place to start tools from (`command
        # -p`: id from the shell's standard path too). No BASH_ENV or ENV, and a HOME that is
        # not root's alone (another account owns it or may write it) replaced by root's own:
        # the login shell LoginShell starts would otherwise run a file the caller named, or
        # another account's profile, as root.
        root = (
            f"PATH={ROOT_PATH} && export PATH && unset BASH_ENV ENV && "
            '{ [ -n "$(find "$HOME" -maxdepth 0 -user 0 ! -perm /022 2>/dev/null)" ] || '
            "{ HOME=~root && export HOME; }; } && cd /"
        )
        parts = [f'[ "$(command -p id -u 2>/dev/null)" = 0 ] && {root}']
        if bound is not None:  # seconds for each call a fact bounds (BOUNDED)
            parts.insert(0, f"GPURIG_BOUND={int(bound)}")
        for index, (fact, _, kwargs) in enumerate(self._facts):
            parts.append(section(self._marker, str(index), fact.command(**kwargs)))
        parts.append("exit 0")
        return "\n".join(parts)

    def process(self, output: list[str]) -> dict[str, Any]:
        parts = sections(output, self._marker)
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
        if isinstance(value, Unreadable | FactFailed):
            raise value
        return value
