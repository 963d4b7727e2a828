"""Parse YAML that may be hostile: bounded in values written, what aliases add, depth and
integer size (its bytes and characters are gpurig.spec.text_file's).

An inventory is shallow, and what it writes out is bounded by the file's size, so anything far
beyond that is refused before it can hang or exhaust memory: a FIFO or /dev/zero named as the
file, an alias bomb (a few hundred bytes that expand to billions of nodes), nesting that
overflows the stack, an integer longer than Python will convert. Each of these is refused in
milliseconds, naming the line; only a big plain file costs what parsing it up to a bound costs
(see the numbers in gpurig.spec.text_file).
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.scanner import RoundTripScanner

from gpurig.spec.text_file import YamlRefused, check_text

# What a document writes out is bounded by count: past what a fleet writes (10,000 hosts of 36
# values each, address, SSH port and key and a four-key spec, are 360,000), and far below the 4
# million one-character values the file's size would allow, whose parse took 0.1 ms and 1.1 KiB
# each here: minutes and gigabytes.
MAX_WRITTEN = 500_000
# What aliases add, by what is written: each written value may stand for ALIAS_FACTOR more (a
# host entry of about ten values naming a shared spec of a hundred), and any document for
# ALIAS_FLOOR more (a small file sharing one big block). After parsing, every expanded value is
# walked again (plain types, the schema, the merge) at about an eighth of what parsing a written
# one costs (1,500 hosts naming one spec: 13,570 values written, 117,001 expanded, 1.3 s to
# parse and 1.4 s after), so the walk costs at most about one and a half times the parse; an
# alias bomb, a few hundred bytes standing for billions, is far past both.
ALIAS_FACTOR = 10
ALIAS_FLOOR = 20_000
MAX_DEPTH = 32  # the deepest inventory key (hosts.H.spec.repos.P.python.keep[0]) is 8
MAX_INT_CHARS = 32  # a 64-bit limit has 20 characters; Python refuses to convert 4300 digits
_INT_TAG = "tag:yaml.org,2002:int"


class BoundedScanner(RoundTripScanner):
    """ruamel's scanner, refusing flow nesting (`[[[...`) past MAX_DEPTH as it reads it: each
    open bracket may start a key, and the scanner's look-ahead over them is quadratic."""

    def fetch_flow_collection_start(self, TokenClass: Any, to_push: str) -> None:
        if len(self.flow_context) >= MAX_DEPTH:
            raise YamlRefused(self.reader.line + 1, f"nested deeper than {MAX_DEPTH} levels")
        super().fetch_flow_collection_start(TokenClass, to_push)


class BoundedComposer(Composer):
    """ruamel's composer, counting the nodes written, the nodes and depth every alias
    expands to, and refusing where aliases multiply the document (see ALIAS_FACTOR)."""

    def compose_document(self) -> Any:
        self.written = 0  # nodes the text spells out so far
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
            self._bound_aliases(line)
            return node
        before, outer = self.expanded, self.deepest
        self.deepest = depth
        self.written += 1
        if self.written > MAX_WRITTEN:
            raise YamlRefused(line, f"more than {MAX_WRITTEN} values written")
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

    def _bound_aliases(self, line: int) -> None:
        """Refuse once the aliases so far add more than the values written so far allow."""
        bound = self.written + max(ALIAS_FLOOR, ALIAS_FACTOR * self.written)
        if self.expanded > bound:
            raise YamlRefused(
                line, f"aliases expand the {self.written} values written to more than {bound}"
            )


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
