"""The `gpurig` console script. pyinfra's parallelism is gevent: sockets and threads must be
cooperative before paramiko is imported, so the patch comes first, as in pyinfra's own CLI.
Patching later (inside a command) leaves paramiko on real threads and serialises the fleet.
The patch (and gevent) costs start-up, so only the commands that connect to hosts get it.
The node contracts run first, without click, on any Python the package installs on; every
other command needs the full install's (gpurig.node.floor)."""

from __future__ import annotations

import sys

CONNECTING = frozenset({"accept", "drift", "onboard", "up"})


def command_name(argv: list[str]) -> str | None:
    """The subcommand in `argv`: its first word that is not an option (the group's own
    options, --version and --help, take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def connects(argv: list[str]) -> bool:
    """Whether the command reads or changes hosts over SSH. `--local` reads this machine in a
    subprocess (the node contracts, `up --local`): no SSH, no greenlets, no patch to pay for;
    `up --local` patches first when it has something to converge (gpurig.node.up)."""
    return command_name(argv) in CONNECTING and "--local" not in argv


def done(status: int) -> None:
    """Exit with `status` once stdout and stderr are flushed, without the interpreter's
    teardown: freeing every module a contract loaded cost it a tenth of its run at every job
    start (benchmarks/node_contracts.py). What a contract writes is written and closed before
    it returns (the textfile, its records, syslog) and it registers nothing to run at exit."""
    import os

    if "logging" in sys.modules:  # up's converge: its handlers flushed and closed
        sys.modules["logging"].shutdown()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: what could not be said is lost, the status still counts
        pass
    os._exit(status)


def acts_here(argv: list[str]) -> bool:
    """Whether the command acts on this machine as whoever runs it: the node contracts and
    `ack`. (`up --local` builds root's environment itself where its spec is root's: a user's
    `up` keeps the user's.)"""
    name = command_name(argv)
    return name == "ack" or (name == "drift" and "--local" in argv)


def main() -> None:
    if acts_here(sys.argv[1:]):  # as root: nothing of the caller's reaches what root starts
        from gpurig.root_env import scrub

        scrub()
    from gpurig.node import argv as node_argv

    call = node_argv.parse(sys.argv[1:])
    if call is not None:  # a node contract: no click, no CLI module (gpurig.node.argv)
        done(node_argv.run(call))
    from gpurig.node.floor import need_full

    name = command_name(sys.argv[1:])
    need_full(f"gpurig {name}" if name else "gpurig's command line")
    if connects(sys.argv[1:]):
        from gpurig.remote.cooperative import patch
        from gpurig.remote.deferred import defer

        patch()
        defer()
    from gpurig.cli.main import main as cli

    try:
        cli()
    except SystemExit as exit_:
        # At exit paramiko joins each transport thread it started, and a closed transport's
        # thread sees it is closed only at its read's next 0.1 s tick: about 65 ms at the end
        # of every drift (benchmarks/README.md, "One far host"), long after the connections
        # closed and the report was written. Nothing else of a connecting command runs then.
        code = exit_.code
        if connects(sys.argv[1:]) and (code is None or isinstance(code, int)):
            done(code or 0)
        raise
