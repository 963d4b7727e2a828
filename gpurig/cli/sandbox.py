"""`gpurig sandbox up|down|status|list`. The manager is imported by each command, not here:
every `gpurig` command loads this group, and the manager pulls in the sandbox's services."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from gpurig.sandbox.proc import SandboxError
from gpurig.sandbox.rootfs import DEFAULT_RELEASE, RELEASES
from gpurig.sandbox.state import locate


def _fail(command: str, error: SandboxError) -> None:
    click.echo(f"gpurig sandbox {command}: {error}", err=True)
    sys.exit(1)


def which_sandbox(command: Callable[..., Any]) -> Callable[..., Any]:
    """--name and --dir, resolved into `name` and `top` for the command."""

    @click.option(
        "--name",
        help="The sandbox's name (1-12 of a-z, 0-9, -); each name has its own directory, "
        "bridge, subnets and ports.  [default: $GPURIG_SANDBOX or 'default']",
    )
    @click.option(
        "--dir",
        "top",
        type=click.Path(path_type=Path, file_okay=False),
        help="Keep the sandbox here instead of ~/.local/state/gpurig/sandboxes/NAME.  "
        "[default: $GPURIG_SANDBOX_DIR]",
    )
    def wrapper(name: str | None, top: Path | None, **kwargs: Any) -> Any:
        try:
            name, top = locate(name, top)
        except SandboxError as e:
            _fail(command.__name__, e)
        return command(name=name, top=top, **kwargs)

    wrapper.__name__ = command.__name__
    wrapper.__doc__ = command.__doc__
    return wrapper


@click.group()
def sandbox() -> None:
    """Disposable real SSH hosts on this machine (root; for tests, the demo, benchmarks).
    Sandboxes have names and run side by side."""


@sandbox.command()
@click.option("--fleet", "fleet_hosts", type=click.IntRange(0, 1000), default=1, show_default=True)
@click.option("--full", "full_hosts", type=click.IntRange(0, 20), default=0, show_default=True)
@click.option(
    "--behind-login",
    type=click.IntRange(0, 250),
    default=0,
    show_default=True,
    help="Also a login node, and this many fleet hosts reachable only through it (their "
    "inventory group `behind-login` carries its ssh.jump).",
)
@click.option(
    "--user",
    "cluster_users",
    multiple=True,
    metavar="NAME",
    help="A cluster user on full-1: no sudo rights, subuid/subgid and Podman for rootless "
    "containers; in the inventory as full-1-NAME with scope: user (repeat; kept by later ups).",
)
@click.option(
    "--slurm",
    "with_slurm",
    is_flag=True,
    help="Also a SLURM cluster: slurmctld on full host slurm-ctl, slurmd on slurm-1 and "
    "slurm-2, user alice (a cluster user as --user makes them) with a shared home, in the "
    "inventory as slurm-1-alice ...; ready when sinfo lists the nodes idle.",
)
@click.option(
    "--release",
    type=click.Choice(list(RELEASES)),
    default=DEFAULT_RELEASE,
    show_default=True,
    help="The Debian release of the hosts asked for here; another release's hosts are named "
    "after it (full-trixie-1, fleet-bullseye-001) and run beside the others.",
)
@which_sandbox
def up(
    fleet_hosts: int,
    full_hosts: int,
    behind_login: int,
    cluster_users: tuple[str, ...],
    with_slurm: bool,
    release: str,
    name: str,
    top: Path,
) -> None:
    """Start at least this many fleet and full hosts, and write their inventory."""
    from gpurig.sandbox import manager

    began = time.monotonic()
    try:
        manager.up(
            top,
            name,
            fleet_hosts,
            full_hosts,
            log=click.echo,
            behind_login=behind_login,
            cluster_users=cluster_users,
            with_slurm=with_slurm,
            release=release,
        )
    except SandboxError as e:
        _fail("up", e)
    click.echo(f"ready in {time.monotonic() - began:.1f}s")


@sandbox.command()
@click.option("--purge-cache", is_flag=True, help="Also drop the cached rootfs and host image.")
@click.option("--all", "every", is_flag=True, help="Every sandbox `gpurig sandbox list` shows.")
@click.option(
    "--release",
    type=click.Choice([r for r in RELEASES if r != DEFAULT_RELEASE]),
    help="Only the hosts of this release; the sandbox and its other hosts keep running.",
)
@which_sandbox
def down(purge_cache: bool, every: bool, release: str | None, name: str, top: Path) -> None:
    """Remove everything the sandbox made, by its own records."""
    from gpurig.sandbox import manager

    try:
        env = manager.Paths(top).podman_env() if purge_cache else {}
        if release:
            manager.down_release(top, release, log=click.echo)
        elif every:
            manager.down_all(log=click.echo)
        else:
            manager.down(top, log=click.echo)
        if purge_cache:
            manager.purge_cache(env)
    except SandboxError as e:
        _fail("down", e)


@sandbox.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON rows.")
@which_sandbox
def status(as_json: bool, name: str, top: Path) -> None:
    """List the sandbox's services and hosts; exit 1 if any is down."""
    from gpurig.sandbox import manager

    if not manager.Paths(top).state.exists():
        click.echo(f"gpurig sandbox status: no sandbox {name!r} (in {top})", err=True)
        sys.exit(1)
    rows = manager.status(top)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        for row in rows:
            state = "up" if row["up"] else "DOWN"
            detail = f" ({row['state']})" if "state" in row else ""
            click.echo(f"{row['name']:<16} {row['kind']:<9} {row['address']:<24} {state}{detail}")
    sys.exit(0 if all(row["up"] for row in rows) else 1)


@sandbox.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON rows.")
def list_(as_json: bool) -> None:
    """Every sandbox on record: name, directory, bridge, subnet, hosts, status."""
    from gpurig.sandbox import manager

    rows = manager.listing()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"{'NAME':<13} {'BRIDGE':<16} {'SUBNET':<16} {'HOSTS':>5}  {'STATUS':<9} DIR")
    for r in rows:
        click.echo(
            f"{r['name']:<13} {r['bridge']:<16} {r['subnet']:<16} {r['hosts']:>5}  "
            f"{r['status']:<9} {r['dir']}"
        )
