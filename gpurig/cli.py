"""The `gpurig` command line. Exit codes follow DESIGN: 0 ok, 1 drift/failure, 2 bad input."""

from __future__ import annotations

import click

from gpurig import __version__
from gpurig.cli_sandbox import sandbox


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpurig")
def main() -> None:
    """Declarative provisioning and drift checking for GPU hosts."""


main.add_command(sandbox)

if __name__ == "__main__":
    main()
