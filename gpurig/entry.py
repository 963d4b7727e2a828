"""The `gpurig` console script. pyinfra's parallelism is gevent: sockets and threads must be
cooperative before paramiko is imported, so the patch comes first, as in pyinfra's own CLI.
Patching later (inside a command) leaves paramiko on real threads and serialises the fleet."""

from gevent import monkey


def main() -> None:
    monkey.patch_all()
    from gpurig.cli import main as cli

    cli()
