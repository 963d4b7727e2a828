"""The node contracts' command lines read without click: click and the CLI module are a
fifth of a Prolog's start (benchmarks/node_contracts.py). Only the shapes the node contracts
are run with are read here (`drift --local --spec FILE|--as NAME INVENTORY [--mode M] [--format F]
[--textfile DIR]`, `up --local --spec FILE`); anything else, a help, a typo, an option out of
place or a value click would refuse, is None and goes to click, so one parser says every
error (tests/unit/test_node_argv.py holds the two to the same reading). So does a report
without a mode while GPURIG_DOCS_URL is set: click checks the address and its links go in."""

from __future__ import annotations

import os

from gpurig.named_tuple import NamedTuple
from gpurig.report.formats import FORMATS

# The node contracts by name (gpurig/data/node_modes.yaml defines each): the one list the
# command line and click's choice share. Here, where nothing of the node wing is imported:
# gpurig.node.modes loads the checks and the plans, which would then load before a contract's
# read is started (gpurig.node.ahead), and it imports nothing from here (no ring).
MODES = ("prolog", "healthcheck", "npd")
_VALUED = {"drift": ("--spec", "--as", "--mode", "--format", "--textfile"), "up": ("--spec",)}


class NodeCall(NamedTuple):
    """A node call's words; the textfile's directory a string (no pathlib before the
    contract's read starts: gpurig.node.ahead)."""

    command: str
    inventory: str | None = None
    as_host: str | None = None
    spec_file: str | None = None
    mode: str | None = None
    fmt: str = "table"
    textfile: str | None = None


def parse(argv: list[str]) -> NodeCall | None:
    """The node call `argv` (after the program's name) makes, or None for click to read."""
    if not argv or argv[0] not in _VALUED or "--local" not in argv[1:]:
        return None
    values: dict[str, str] = {}
    positional: list[str] = []
    words = iter(argv[1:])
    for word in words:
        name, _, inline = word.partition("=")
        if word == "--local":
            continue
        if name in _VALUED[argv[0]] and name not in values:
            value = inline if inline else next(words, None)
            if not value or (not inline and value.startswith("-")):
                return None
            values[name] = value
        elif word.startswith("-") or word == "":
            return None
        else:
            positional.append(word)
    return _checked(argv[0], values, positional)


def _checked(command: str, values: dict[str, str], positional: list[str]) -> NodeCall | None:
    """The call, where click would take the same words without a usage error."""
    spec, as_host = values.get("--spec"), values.get("--as")
    if command == "up":
        usable = spec and not positional and not os.path.isdir(spec)
        return NodeCall("up", spec_file=spec) if usable else None
    mode, fmt = values.get("--mode"), values.get("--format", "table")
    textfile = values.get("--textfile")
    if (mode is not None and mode not in MODES) or fmt not in FORMATS or len(positional) > 1:
        return None
    if textfile is not None and not (os.path.isdir(textfile) and os.access(textfile, os.W_OK)):
        return None
    inventory = positional[0] if positional else None
    if any(path is not None and os.path.isdir(path) for path in (spec, inventory)):
        return None  # click.Path(dir_okay=False) refuses a directory
    if (spec is None) == (as_host is None) or (spec is not None and inventory is not None):
        return None
    if as_host is not None and inventory is None:
        return None
    if mode is None and os.environ.get("GPURIG_DOCS_URL"):  # gpurig.report.docs_url.ENV
        return None
    return NodeCall("drift", inventory, as_host, spec, mode, fmt, textfile)


def run(call: NodeCall) -> int:
    from gpurig.node.command import drift_here, up_here

    if call.command == "up":
        return up_here([], None, call.spec_file)
    return drift_here(call.inventory, call.as_host, call.spec_file, call.fmt, None, call.mode,
                      call.textfile)  # fmt: skip
