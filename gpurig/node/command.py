"""`gpurig drift --local` and `gpurig up --local` after their options are read: one body for
click's commands (gpurig/cli/main.py) and for the node contracts' own reading of the command
line (gpurig/node/argv.py), which leaves click unloaded. Returns the exit status."""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # a contract starts its read from here: typing loads beside it
if TYPE_CHECKING:
    from typing import TextIO

    from gpurig.node.ahead import Ahead
    from gpurig.spec.inventory import Host


def this_node() -> str:
    """The name a spec file's host gets: this machine's."""
    return os.uname().nodename or "localhost"


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def drift_here(
    inventory: str | None,
    as_host: str | None,
    spec_file: str | None,
    fmt: str = "table",
    output: TextIO | None = None,
    mode: str | None = None,
    textfile: str | os.PathLike[str] | None = None,
    docs_url: str | None = None,
) -> int:
    """This machine read and judged as `as_host` of `inventory`, or as the spec in
    `spec_file`, as `mode`'s contract says when one is given; without one, the report's ids
    linked to their pages under `docs_url` (checked: gpurig.report.docs_url)."""
    # A contract's read starts first: the checks load while it runs (gpurig.node.ahead).
    ahead = _ahead(spec_file or str(inventory), as_host, mode) if mode is not None else None
    from gpurig.spec.inventory import InventoryError, load_inventory, load_spec_file

    try:
        if spec_file is not None:
            hosts = [load_spec_file(spec_file, this_node())]
        else:
            hosts = list(load_inventory([str(inventory)]).hosts)
    except InventoryError as exc:
        _say(str(exc))
        if ahead is not None:
            ahead.cancel()
        if mode is not None:
            from gpurig.node.run import refused

            return refused(mode, str(exc))
        return 2
    host = hosts[0] if as_host is None else next((h for h in hosts if h.name == as_host), None)
    if host is None:
        _say(f"{inventory}: no host named {as_host}")
        if ahead is not None:
            ahead.cancel()
        return 2
    started = time.monotonic()
    if mode is not None:
        from gpurig.node.modes import mode as contract
        from gpurig.node.run import run_mode

        take = ahead.take if ahead is not None else None
        return run_mode(contract(mode), host, started, fmt, output, textfile, take)
    from gpurig.node.read import drift_local
    from gpurig.report.render import exit_code, render
    from gpurig.report.textfile import written

    reports = [drift_local(host)]
    stream = output or sys.stdout
    stream.write(render(reports, fmt, output is None and stream.isatty(), docs_url))
    if textfile is not None and not written(textfile, reports, time.monotonic() - started, False):
        return 1
    return exit_code(reports)


def _ahead(source: str, as_host: str | None, mode: str) -> Ahead | None:
    """The read of `mode` for the file `source`, started if one was kept; None where the file
    cannot be read (its load says why)."""
    from gpurig.node.ahead import Ahead

    data = _bytes(source)
    return None if data is None else Ahead(data, as_host, mode)


def _bytes(path: str | None) -> bytes | None:
    """The bytes of the file a host came from, which key the read kept for it; None where
    there is no one file or it cannot be read (its load says why)."""
    from gpurig.spec.text_file import YamlRefused, read_bytes

    try:
        return read_bytes(path) if path is not None else None
    except YamlRefused:
        return None


def up_here(inventories: list[str], as_host: str | None, spec_file: str | None) -> int:
    """Converge this machine as `as_host` of `inventories` or as the spec in `spec_file`;
    print what a job needs on stdout, everything else on stderr."""
    from gpurig.node.floor import need_full

    need_full("gpurig up --local")  # the converge runs through pyinfra
    from gpurig.spec.inventory import InventoryError, load_inventory, load_spec_file

    try:
        if spec_file is not None:
            host: Host | None = load_spec_file(spec_file, this_node())
        else:
            host = next((h for h in load_inventory(inventories).hosts if h.name == as_host), None)
    except InventoryError as exc:
        _say(str(exc))
        return 2
    if host is None:
        _say(f"{', '.join(inventories) or 'no inventory'}: no host named {as_host}")
        return 2
    from gpurig.node.up import UpError, up

    one_file = spec_file or (inventories[0] if len(inventories) == 1 else None)
    try:
        ready = up(host, _say, _bytes(one_file))
    except UpError as exc:
        _say(f"gpurig up: {exc}")
        return 1
    for line in ready.exports:
        print(line)
    state = "converged" if ready.converged else "already as declared"
    _say(f"gpurig up: {host.name} ready ({state})")
    return 0
