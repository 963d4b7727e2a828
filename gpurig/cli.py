"""The `gpurig` command line. Exit codes follow DESIGN: 0 ok, 1 drift/failure, 2 bad input."""

from __future__ import annotations

import click

from gpurig import __version__
from gpurig.inventory import InventoryError, load_inventory


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpurig")
def main() -> None:
    """Declarative provisioning and drift checking for GPU hosts."""


@main.command()
@click.argument("inventories", nargs=-1, required=True, metavar="INVENTORY...")
def validate(inventories: tuple[str, ...]) -> None:
    """Check inventory files offline: exit 0 when valid, 2 with every problem when not."""
    try:
        inventory = load_inventory(inventories)
    except InventoryError as exc:
        click.echo(str(exc), err=True)
        raise SystemExit(2) from None
    click.echo(f"OK: {len(inventory.hosts)} hosts")


if __name__ == "__main__":
    main()
