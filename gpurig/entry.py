"""The `gpurig` console script. pyinfra's parallelism is gevent: sockets and threads must be
cooperative before paramiko is imported, so the patch comes first, as in pyinfra's own CLI.
Patching later (inside a command) leaves paramiko on real threads and serialises the fleet.
The patch (and gevent) costs start-up, so only the commands that connect to hosts get it."""

import sys

CONNECTING = frozenset({"accept", "drift", "onboard", "up"})


def command_name(argv: list[str]) -> str | None:
    """The subcommand in `argv`: its first word that is not an option (the group's own
    options, --version and --help, take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main() -> None:
    if command_name(sys.argv[1:]) in CONNECTING:
        from gevent import monkey

        monkey.patch_all()
    from gpurig.cli import main as cli

    cli()
