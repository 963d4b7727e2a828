"""The `gpurig` console script. pyinfra's parallelism is gevent: sockets and threads must be
cooperative before paramiko is imported, so the patch comes first, as in pyinfra's own CLI.
Patching later (inside a command) leaves paramiko on real threads and serialises the fleet.
The patch (and gevent) costs start-up, so only the commands that connect to hosts get it."""

import sys
from collections.abc import Iterator
from contextlib import contextmanager

CONNECTING = frozenset({"accept", "drift", "onboard", "up"})


def command_name(argv: list[str]) -> str | None:
    """The subcommand in `argv`: its first word that is not an option (the group's own
    options, --version and --help, take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


@contextmanager
def one_plugin_scan() -> Iterator[None]:
    """gevent asks importlib.metadata for its plugins' entry points at each of its patch events
    (about 25 in patch_all), each a scan of every installed package: about 0.13 s of CPU at
    every start. One scan answers them all while patching (the same entry points)."""
    from importlib import metadata

    scan, found = metadata.entry_points, metadata.entry_points()
    metadata.entry_points = lambda **select: found.select(**select) if select else found
    try:
        yield
    finally:
        metadata.entry_points = scan


def main() -> None:
    if command_name(sys.argv[1:]) in CONNECTING:
        from gevent import monkey

        with one_plugin_scan():
            monkey.patch_all()
    from gpurig.cli import main as cli

    cli()
