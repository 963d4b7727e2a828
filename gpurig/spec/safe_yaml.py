"""Read YAML that may be hostile: bounded in bytes, characters, nodes, depth and integer size.

An inventory is small and shallow, so anything far beyond that is refused before it can hang
or exhaust memory: a FIFO or /dev/zero named as the file, an alias bomb (a few hundred bytes
that expand to billions of nodes), nesting that overflows the stack, an integer longer than
Python will convert. Each of these is refused in milliseconds, naming the line; only a big
plain file costs what parsing it up to a bound costs (see the numbers below).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.scanner import RoundTripScanner

from gpurig.report.textsafe import escape_char, first_unsafe

# ruamel parses in pure Python: on a busy 2-core machine a 1 MiB scalar took 0.6 s, a 1 MiB
# comment 1.1 s, and 20,000 values 3 s. 1 MiB is a thousand hosts and change.
MAX_BYTES = 1024**2
# Values once aliases are expanded: 80 times the example fleet (a thousand hosts with a dozen
# values each), where an alias bomb stands for billions.
MAX_NODES = 20_000
MAX_DEPTH = 32  # the deepest inventory key (hosts.H.spec.repos.P.python.keep[0]) is 8
MAX_INT_CHARS = 32  # a 64-bit limit has 20 characters; Python refuses to convert 4300 digits
_INT_TAG = "tag:yaml.org,2002:int"
_TOO_LARGE = f"larger than {MAX_BYTES // 1024**2} MiB, the most gpurig reads as an inventory"


class YamlRefused(Exception):
    """Input gpurig will not parse; `line` is 1-based, None for the file as a whole."""

    def __init__(self, line: int | None, message: str) -> None:
        self.line = line
        self.message = message
        super().__init__(message if line is None else f"line {line}: {message}")


def read_bytes(path: str | Path) -> bytes:
    """The bytes of a regular file of at most MAX_BYTES; never blocks on a FIFO or a device.

    Raises YamlRefused for anything else (OSError's text included when it cannot be opened).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise YamlRefused(None, f"cannot read: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise YamlRefused(None, f"cannot read: not a regular file ({_kind(mode)})")
        chunks, size = [], 0
        while size <= MAX_BYTES and (chunk := os.read(fd, MAX_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise YamlRefused(None, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > MAX_BYTES:
        raise YamlRefused(None, _TOO_LARGE)
    return b"".join(chunks)


def read_text(path: str | Path) -> str:
    """read_bytes, decoded as UTF-8 (a byte order mark first, as some editors save, is not
    text) and checked by check_text."""
    raw = read_bytes(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise YamlRefused(line, f"cannot read: not UTF-8 (byte 0x{raw[exc.start]:02x})") from None
    check_text(text)
    return text


def check_text(text: str) -> None:
    """Refuse text too long or carrying control characters (tab, newline and CR are fine)."""
    if len(text) > MAX_BYTES:
        raise YamlRefused(None, _TOO_LARGE)
    bad = first_unsafe(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        raise YamlRefused(line, f"control character {escape_char(bad[0])} is not allowed")


def _kind(mode: int) -> str:
    kinds = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket")]  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "not a file")


class BoundedScanner(RoundTripScanner):
    """ruamel's scanner, refusing flow nesting (`[[[...`) past MAX_DEPTH as it reads it: each
    open bracket may start a key, and the scanner's look-ahead over them is quadratic."""

    def fetch_flow_collection_start(self, TokenClass: Any, to_push: str) -> None:
        if len(self.flow_context) >= MAX_DEPTH:
            raise YamlRefused(self.reader.line + 1, f"nested deeper than {MAX_DEPTH} levels")
        super().fetch_flow_collection_start(TokenClass, to_push)


class BoundedComposer(Composer):
    """ruamel's composer, counting the nodes and depth every alias expands to."""

    def compose_document(self) -> Any:
        self.expanded = 0  # nodes so far, each alias counted as all it stands for
        self.deepest = 0  # deepest level reached below the node being composed
        self.sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, height)
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        line, depth = event.start_mark.line + 1, self.depth + 1
        if isinstance(event, AliasEvent):
            node = super().compose_node(parent, index)
            if id(node) not in self.sizes:
                raise YamlRefused(line, f"alias *{event.anchor} refers to a node containing it")
            nodes, height = self.sizes[id(node)]
            self._charge(line, nodes, depth + height - 1)
            return node
        before, outer = self.expanded, self.deepest
        self.deepest = depth
        self._charge(line, 1, depth)
        node = super().compose_node(parent, index)
        if (
            isinstance(node, ScalarNode)
            and node.tag == _INT_TAG
            and len(node.value) > MAX_INT_CHARS
        ):
            raise YamlRefused(line, f"an integer of {len(node.value)} characters is too long")
        self.sizes[id(node)] = (self.expanded - before, self.deepest - depth + 1)
        self.deepest = max(outer, self.deepest)
        return node

    def _charge(self, line: int, nodes: int, depth: int) -> None:
        self.expanded += nodes
        self.deepest = max(self.deepest, depth)
        if depth > MAX_DEPTH:
            raise YamlRefused(line, f"nested deeper than {MAX_DEPTH} levels")
        if self.expanded > MAX_NODES:
            raise YamlRefused(line, f"more than {MAX_NODES} values once aliases are expanded")


def syntax_refusal(exc: YAMLError) -> YamlRefused:
    """A parser's error as a refusal at its line: what it found, and what it was reading."""
    if not isinstance(exc, MarkedYAMLError):
        return YamlRefused(None, f"YAML error: {exc}")
    mark = exc.problem_mark or exc.context_mark
    message = f"YAML syntax error: {exc.problem or exc.context}"
    if exc.problem and exc.context and exc.context_mark:
        message += f" ({exc.context} at line {exc.context_mark.line + 1})"
    return YamlRefused(mark.line + 1 if mark else None, message)


def load(text: str, yaml: YAML) -> Any:
    """The document in `text` through `yaml` (a bounded_yaml), every failure a YamlRefused."""
    check_text(text)
    try:
        return yaml.load(text)
    except YAMLError as exc:
        raise syntax_refusal(exc) from None


def bounded_yaml() -> YAML:
    """A round-trip YAML whose scanner and composer enforce the bounds above."""
    yaml = YAML(typ="rt")
    yaml.Scanner = BoundedScanner
    yaml.Composer = BoundedComposer
    return yaml
