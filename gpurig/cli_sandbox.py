"""`gpurig sandbox up|down|status`. The manager is imported by each command, not here: every
`gpurig` command loads this group, and the manager pulls in the sandbox's services."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from gpurig.sandbox.state import default_dir

dir_option = click.option(
    "--dir",
    "top",
    type=click.Path(path_type=Path, file_okay=False),
    default=default_dir,
    show_default="$GPURIG_SANDBOX_DIR or ~/.local/state/gpurig/sandbox",
    help="Where the sandbox keeps its records, keys and inventory.",
)


@click.group()
def sandbox() -> None:
    """Disposable real SSH hosts on this machine (root; for tests, the demo, benchmarks)."""


@sandbox.command()
@click.option("--fleet", "fleet_hosts", type=click.IntRange(0, 1000), default=1, show_default=True)
@click.option("--full", "full_hosts", type=click.IntRange(0, 20), default=0, show_default=True)
@dir_option
def up(fleet_hosts: int, full_hosts: int, top: Path) -> None:
    """Start at least this many fleet and full hosts, and write their inventory."""
    from gpurig.sandbox import manager
    from gpurig.sandbox.proc import SandboxError

    began = time.monotonic()
    try:
        manager.up(top, fleet_hosts, full_hosts, log=click.echo)
    except SandboxError as e:
        click.echo(f"gpurig sandbox up: {e}", err=True)
        sys.exit(1)
    click.echo(f"ready in {time.monotonic() - began:.1f}s")


@sandbox.command()
@click.option("--purge-cache", is_flag=True, help="Also drop the cached rootfs and host image.")
@dir_option
def down(purge_cache: bool, top: Path) -> None:
    """Remove everything the sandbox made, by its own records."""
    from gpurig.sandbox import manager
    from gpurig.sandbox.proc import SandboxError

    try:
        env = manager.Paths(top).podman_env() if purge_cache else {}
        manager.down(top, log=click.echo)
        if purge_cache:
            manager.purge_cache(env)
    except SandboxError as e:
        click.echo(f"gpurig sandbox down: {e}", err=True)
        sys.exit(1)


@sandbox.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON rows.")
@dir_option
def status(as_json: bool, top: Path) -> None:
    """List the sandbox's hosts; exit 1 if any recorded host is down."""
    from gpurig.sandbox import manager

    rows = manager.status(top)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        for row in rows:
            state = "up" if row["up"] else "DOWN"
            click.echo(f"{row['name']:<12} {row['kind']:<9} {row['address']:<18} {state}")
    sys.exit(0 if all(row["up"] for row in rows) else 1)
