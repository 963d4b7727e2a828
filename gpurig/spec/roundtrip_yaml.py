"""ruamel's round-trip loader under gpurig.spec.safe_yaml's bounds: for editing a file in place
(`gpurig pin` keeps its comments, quotes and order), where a document must be written back as
it was read. Validation reads with gpurig.spec.safe_yaml, which is many times faster."""

from __future__ import annotations

from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer
from ruamel.yaml.error import YAMLError
from ruamel.yaml.events import AliasEvent
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.scanner import RoundTripScanner

from gpurig.spec.safe_yaml import MAX_DEPTH, MAX_INT_CHARS, Bounds, syntax_refusal
from gpurig.spec.text_file import YamlRefused, check_text

_INT_TAG = "tag:yaml.org,2002:int"


class BoundedScanner(RoundTripScanner):
    """ruamel's scanner, refusing flow nesting (`[[[...`) past MAX_DEPTH as it reads it: each
    open bracket may start a key, and the scanner's look-ahead over them is quadratic."""

    def fetch_flow_collection_start(self, TokenClass: Any, to_push: str) -> None:
        if len(self.flow_context) >= MAX_DEPTH:
            raise YamlRefused(self.reader.line + 1, f"nested deeper than {MAX_DEPTH} levels")
        super().fetch_flow_collection_start(TokenClass, to_push)


class BoundedComposer(Composer):
    """ruamel's composer, counting under Bounds the nodes written and the nodes and depth
    every alias expands to."""

    def compose_document(self) -> Any:
        self.bounds = Bounds()
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
            self.bounds.alias(line, depth, nodes, height)
            self.deepest = max(self.deepest, depth + height - 1)
            return node
        before, outer = self.bounds.expanded, self.deepest
        self.deepest = depth
        self.bounds.value(line, depth)
        node = super().compose_node(parent, index)
        if (
            isinstance(node, ScalarNode)
            and node.tag == _INT_TAG
            and len(node.value) > MAX_INT_CHARS
        ):
            raise YamlRefused(line, f"an integer of {len(node.value)} characters is too long")
        self.sizes[id(node)] = (self.bounds.expanded - before, self.deepest - depth + 1)
        self.deepest = max(outer, self.deepest)
        return node


def load(text: str, yaml: YAML) -> Any:
    """The document in `text` through `yaml` (a bounded_yaml), every failure a YamlRefused."""
    check_text(text)
    try:
        return yaml.load(text)
    except YAMLError as exc:
        raise syntax_refusal(exc) from None


def bounded_yaml() -> YAML:
    """A round-trip YAML whose scanner and composer enforce the bounds."""
    yaml = YAML(typ="rt")
    yaml.Scanner = BoundedScanner
    yaml.Composer = BoundedComposer
    return yaml
