"""The node contracts' own reading of their command line (gpurig/node/argv.py) against
click's: whatever it reads, click reads the same way and accepts; whatever click would refuse
or it does not know, it leaves to click (None)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest

from gpurig.cli.main import _drift_usage, _up_usage, main
from gpurig.node.argv import NodeCall, parse


def clicks(argv: list[str]) -> dict[str, Any] | None:
    """The subcommand's parameters as click reads `argv`, or None where it refuses them."""
    if not argv or argv[0].startswith("-"):
        return None  # the group's own options (--version, --help) run no command
    name, rest = argv[0], argv[1:]
    command = main.get_command(click.Context(main), name)
    try:
        if command is None:
            return None
        with command.make_context(name, list(rest)) as sub:
            params = dict(sub.params)
        if name == "drift":
            _drift_usage(params["inventory"], params["limits"], params["local"],
                         params["as_host"], params["spec_file"])  # fmt: skip
            if params["mode"] is not None and not params["local"]:
                return None
        else:
            _up_usage(params["inventories"], params["local"], params["as_host"],
                      params["spec_file"])  # fmt: skip
        return {"command": name, **params}
    except (click.UsageError, click.exceptions.Exit):
        return None


def same_call(call: NodeCall, params: dict[str, Any]) -> bool:
    if call.command == "up":
        return params["spec_file"] == call.spec_file and params["as_host"] is None
    return (
        params["inventory"] == call.inventory
        and params["as_host"] == call.as_host
        and params["spec_file"] == call.spec_file
        and params["mode"] == call.mode
        and params["fmt"] == call.fmt
        and params["textfile"] == (None if call.textfile is None else Path(call.textfile))
        and params["output"] is None
        and params["local"]
    )


def cases(tmp: Path) -> tuple[list[list[str]], list[list[str]]]:
    """(what the node contracts run, as the README gives them; odd and wrong variants)."""
    spec, inv, textfile = str(tmp / "node.yaml"), str(tmp / "inv.yaml"), str(tmp / "prom")
    contracts = [
        ["drift", "--local", "--spec", spec, "--mode", mode]
        for mode in ("prolog", "healthcheck", "npd")
    ] + [
        ["drift", "--local", "--spec", spec],
        ["drift", "--local", "--spec", spec, "--mode", "healthcheck", "--textfile", textfile],
        ["drift", "--local", "--spec", spec, "--textfile", textfile, "--format", "json"],
        ["drift", "--local", "--as", "gpu-1", inv, "--mode", "npd"],
        ["drift", inv, "--local", "--as=gpu-1", "--mode=prolog"],
        ["up", "--local", "--spec", spec],
        ["up", "--spec=" + spec, "--local"],
    ]
    odd = [
        ["drift", "--local"],
        ["drift", "--local", "--spec", spec, "--mode", "bogus"],
        ["drift", "--local", "--spec", spec, "--format", "yaml"],
        ["drift", "--local", "--spec", spec, "--mode", "npd", "--mode", "prolog"],
        ["drift", "--local", "--spec", spec, "--textfile", str(tmp / "missing")],
        ["drift", "--local", "--spec", str(tmp)],
        ["drift", "--local", "--spec", spec, inv],
        ["drift", "--local", "--spec", spec, "--as", "gpu-1"],
        ["drift", "--local", "--as", "gpu-1"],
        ["drift", "--local", "--spec", spec, "--limit", "x"],
        ["drift", "--local", "--spec", spec, "--output", str(tmp / "out")],
        ["drift", "--local", "--spec", "--mode", "npd"],
        ["drift", "--local", "--spec="],
        ["drift", "--local", "--spec", spec, "--help"],
        ["drift", "--spec", spec, "--mode", "npd"],
        ["drift", "--local", "--spec", spec, "--", "x"],
        ["drift", "--local", "--spec", spec, "--mod", "npd"],
        ["--version", "drift", "--local", "--spec", spec],
        ["up", "--local", "--as", "gpu-1"],
        ["up", "--local", "--spec", spec, inv],
        ["up", "--spec", spec],
        ["validate", "--local", "--spec", spec],
    ]
    return contracts, odd


def test_the_node_contracts_are_read_without_click_as_click_reads_them(tmp_path: Path) -> None:
    (tmp_path / "prom").mkdir()
    contracts, odd = cases(tmp_path)
    for argv in contracts:
        call, params = parse(argv), clicks(argv)
        assert call is not None and params is not None, argv
        assert same_call(call, params), (argv, call, params)
    left = [argv for argv in odd if parse(argv) is None]
    assert len(left) == len(odd), [argv for argv in odd if argv not in left]
    # the odd ones are a mix click refuses and click reads: the fast path leaves both to it
    assert [argv for argv in odd if clicks(argv) is not None]
    assert [argv for argv in odd if clicks(argv) is None]


@pytest.mark.parametrize("word", ["--textfile", "--spec"])
def test_a_path_click_refuses_is_left_to_click(tmp_path: Path, word: str) -> None:
    """A --textfile that is not a writable directory, a --spec that is one: click says why."""
    argv = ["drift", "--local", "--spec", str(tmp_path / "n.yaml"), word, str(tmp_path / "f")]
    (tmp_path / "f").write_text("a file\n")
    if word == "--spec":
        argv = ["drift", "--local", "--spec", str(tmp_path)]
    assert parse(argv) is None and clicks(argv) is None
