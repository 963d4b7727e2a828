"""The `gpurig` command line. Exit codes follow DESIGN: 0 ok, 1 drift/failure, 2 bad input.

Each command imports what it uses inside its function: `--version`, `validate` and `compat`
must start fast, so none of them may load pyinfra's API, paramiko, gevent or the sandbox
(tests/unit/test_cli_imports.py checks which modules each one leaves loaded).
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TextIO

import click

from gpurig import __version__
from gpurig.node.argv import MODES
from gpurig.remote import retry
from gpurig.report import docs_url as docs
from gpurig.report.formats import FORMATS

if TYPE_CHECKING:
    pass


class LazyGroup(click.Group):
    """Command groups imported only when named (or listed by --help): `gpurig sandbox` alone
    costs every other command ~25 ms of start-up."""

    LAZY: ClassVar[dict[str, str]] = {"sandbox": "gpurig.cli.sandbox"}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.LAZY])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.LAZY:
            return getattr(importlib.import_module(self.LAZY[name]), name)
        return super().get_command(ctx, name)


MARGIN = click.option(
    "--margin",
    type=click.FloatRange(0, 100, max_open=True),
    default=35.0,
    show_default=True,
    help="Percent below the GPU model's baseline that acceptance still passes.",
)


CONNECT_RETRIES = click.option(
    "--connect-retries",
    "retries",
    type=click.IntRange(0, retry.MOST),
    default=retry.RETRIES,
    show_default=True,
    metavar="N",
    help="Try a host that did not answer (timed out, refused, reset) N more times, with a "
    "growing pause; a host key or login refused is never tried again.",
)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpurig")
def main() -> None:
    """Declarative provisioning and drift checking for GPU hosts."""


@main.command()
@click.option("--driver", required=True, help="User-space NVIDIA driver, e.g. 570.124.04.")
@click.option("--kernel-module", help="Loaded kernel module (/proc/driver/nvidia/version).")
@click.option("--cuda", help="torch.version.cuda, e.g. 12.8.")
@click.option("--arch-list", help="torch.cuda.get_arch_list(), comma-separated: sm_80,sm_90.")
@click.option("--capability", help="GPU compute capability, e.g. 9.0.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_context
def compat(
    ctx: click.Context,
    driver: str,
    kernel_module: str | None,
    cuda: str | None,
    arch_list: str | None,
    capability: str | None,
    as_json: bool,
) -> None:
    """Judge one driver/CUDA/torch/GPU combination offline (exit 0 ok or warn, 1 fail)."""
    from gpurig.checks.compat import judge

    arches = None if arch_list is None else [a for a in arch_list.split(",") if a.strip()]
    try:
        verdict, findings = judge(driver, kernel_module, cuda, arches, capability)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    if as_json:
        import json

        rows = [{"id": f.id, "severity": f.severity, "message": f.message} for f in findings]
        click.echo(json.dumps({"verdict": verdict, "findings": rows}, indent=2))
    else:
        click.echo(f"verdict: {verdict}")
        for f in findings:
            click.echo(f"{f.severity}: {f.id}: {f.message}\n  fix: {f.fix}")
    ctx.exit(1 if verdict == "fail" else 0)


@main.command()
@click.argument("inventories", nargs=-1, required=True, metavar="INVENTORY...")
def validate(inventories: tuple[str, ...]) -> None:
    """Check inventory files offline: exit 0 when valid (warnings, such as a private key file
    missing here, on stderr), 2 with every problem when not."""
    from gpurig.spec.inventory import InventoryError, load_inventory
    from gpurig.spec.key_paths import key_warnings
    from gpurig.spec.words import counted

    try:
        inventory = load_inventory(inventories)
    except InventoryError as exc:
        click.echo(str(exc), err=True)
        raise SystemExit(2) from None
    for warning in key_warnings(inventory.hosts):
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"OK: {counted(len(inventory.hosts), 'host')}")


def _keys_load(hosts: Any, passphrase_asked: bool = False) -> None:
    """Exit 2, before any host is touched, where a private key the hosts name cannot be loaded
    here (gpurig.remote.key_load): the inventory's error on this machine, not a host that did
    not answer. Loads paramiko: only the commands that connect call it."""
    from gpurig.remote.key_load import KeyRefused, refuse_unloadable

    try:
        refuse_unloadable(hosts, passphrase_asked)
    except KeyRefused as exc:
        click.echo(str(exc), err=True)
        raise SystemExit(2) from None


def which_spec(prefix: str) -> Callable[[Any], Any]:
    """--as NAME and --spec FILE: the spec this machine is read or converged as (drift, up)."""

    def options(command: Any) -> Any:
        spec = click.option(
            "--spec",
            "spec_file",
            type=click.Path(dir_okay=False),
            help=(f"{prefix}a file" if prefix else "A file")
            + " holding one host's spec (no INVENTORY).",
        )
        name = f"{prefix}INVENTORY's host NAME's spec."
        return click.option("--as", "as_host", metavar="NAME", help=name)(spec(command))

    return options


@main.command()
@click.argument("inventory", type=click.Path(dir_okay=False), required=False)
@click.option("--limit", "limits", multiple=True, metavar="NAME", help="Only this host (repeat).")
@click.option("--local", is_flag=True, help="Check this machine, without SSH (see --as, --spec).")
@which_spec("With --local: ")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--output", type=click.File("w", encoding="utf-8"), help="Write here, not stdout.")
@click.option(
    "--mode",
    type=click.Choice(MODES),
    help="With --local: a node contract (SLURM Prolog/Epilog, SLURM HealthCheckProgram, "
    "node-problem-detector plugin), with its own reads, time, output and exit codes; the "
    "report goes only to --output.",
)
@click.option(
    "--textfile",
    type=click.Path(exists=True, file_okay=False, writable=True, path_type=Path),
    metavar="DIR",
    help="Also write DIR/gpurig_drift.prom for node_exporter's textfile collector.",
)
@click.option(
    "--docs-url",
    metavar="URL",
    envvar=docs.ENV,
    show_envvar=True,
    help="The documentation's address (http or https): the markdown and junit reports link "
    "each finding id to its page, URL/findings/ID/.",
)
@CONNECT_RETRIES
def drift(
    inventory: str | None,
    limits: tuple[str, ...],
    local: bool,
    as_host: str | None,
    spec_file: str | None,
    fmt: str,
    output: TextIO | None,
    mode: str | None,
    textfile: Path | None,
    docs_url: str | None,
    retries: int,
) -> None:
    """Check hosts read-only against their spec: exit 0 clean, 1 drift, 2 invalid input.

    With --local, check the machine this runs on (a SLURM prolog, a pod's start script, a CI
    job) as host NAME of INVENTORY (--as NAME) or as the spec in a file (--spec FILE).

    --mode prolog|healthcheck|npd runs one of the node contracts (docs/node-contracts.md in
    the documentation): prolog exits 1 on an error (slurmd drains the node and holds the job);
    healthcheck drains its node with a `gpurig:` reason and resumes only its own drains;
    npd prints one line of at most 80 characters, exit 0 OK, 1 problem, 2 could not check.

    --textfile DIR writes the results for Prometheus (node_exporter's textfile collector): one
    file per node with --local, one file with a `host` label per host from a controller.

    --docs-url URL (or GPURIG_DOCS_URL), where the documentation is published: each finding id
    in the markdown and junit reports links to its page, and the table's last line names the
    first id's."""
    _drift_usage(inventory, limits, local, as_host, spec_file)
    if mode is not None and not local:
        raise click.UsageError("--mode goes with --local")
    docs_url = _docs_url(docs_url, mode)
    if local:
        from gpurig.node.command import drift_here

        raise SystemExit(
            drift_here(inventory, as_host, spec_file, fmt, output, mode, textfile, docs_url)
        )
    from gpurig.spec.inventory import InventoryError, load_inventory

    try:
        hosts = list(load_inventory([str(inventory)]).hosts)
    except InventoryError as exc:
        click.echo(str(exc), err=True)
        raise SystemExit(2) from None
    unknown = [name for name in limits if name not in {h.name for h in hosts}]
    if unknown:
        click.echo(f"{inventory}: no host named {', '.join(unknown)}", err=True)
        raise SystemExit(2)
    selected = [h for h in hosts if not limits or h.name in limits]
    _keys_load(selected)
    from gpurig.remote.early import dial

    dialled = dial(selected)  # checked, they may be dialled: the handshake goes on as we load
    # Imported here: the console script (gpurig.cli.entry) has patched gevent in by now.
    from gpurig.remote.drift import progress_stream, run_drift
    from gpurig.remote.pyinfra_inventory import cache_dir
    from gpurig.report.render import exit_code, render
    from gpurig.report.textfile import written

    started = time.monotonic()
    reports = run_drift(selected, cache_dir(), progress_stream(), retries, dialled)
    duration = time.monotonic() - started
    stream = output or sys.stdout
    stream.write(render(reports, fmt, output is None and stream.isatty(), docs_url))
    if textfile is not None and not written(textfile, reports, duration, True):
        raise SystemExit(1)
    raise SystemExit(exit_code(reports))


def _docs_url(value: str | None, mode: str | None) -> str | None:
    """--docs-url URL or GPURIG_DOCS_URL, checked (gpurig.report.docs_url): a bad one exits 2
    before any host is read. A node contract's report (--mode) links nothing: it refuses the
    option and never stops on the variable."""
    if value is None:
        return None
    ctx = click.get_current_context()
    from_env = ctx.get_parameter_source("docs_url") is click.core.ParameterSource.ENVIRONMENT
    if mode is not None:
        if from_env:
            return None
        raise click.UsageError("--docs-url goes without --mode: a node contract links nothing")
    try:
        return docs.checked(value)
    except ValueError as exc:
        hint = docs.ENV if from_env else "'--docs-url'"
        raise click.BadParameter(f"{value!r}: {exc}", param_hint=hint) from None


def _drift_usage(
    inventory: str | None,
    limits: tuple[str, ...],
    local: bool,
    as_host: str | None,
    spec_file: str | None,
) -> None:
    """Refuse option combinations that say two things (click exits 2 with the usage)."""
    if not local:
        if as_host is not None or spec_file is not None:
            raise click.UsageError("--as and --spec go with --local")
        if inventory is None:
            raise click.UsageError("missing argument INVENTORY")
        return
    if limits:
        raise click.UsageError("--local checks one machine: use --as NAME, not --limit")
    if (as_host is None) == (spec_file is None):
        raise click.UsageError("--local needs one of --as NAME (with INVENTORY) or --spec FILE")
    if as_host is not None and inventory is None:
        raise click.UsageError("--as NAME needs the INVENTORY that defines NAME")
    if spec_file is not None and inventory is not None:
        raise click.UsageError("--spec FILE replaces INVENTORY: give one of them")


@main.command()
@click.argument("inventories", nargs=-1, metavar="[INVENTORY]...")
@click.option("--local", is_flag=True, help="Converge this machine (required: up acts locally).")
@which_spec("")
def up(
    inventories: tuple[str, ...], local: bool, as_host: str | None, spec_file: str | None
) -> None:
    """Bring this machine to its declared state and print what a job needs, for a job script:

        ready=$(gpurig up --local --as NAME) || exit 1; eval "$ready"

    stdout carries only `export DOCKER_HOST=...` and `export CONTAINER_HOST=...` (the Podman
    socket the spec declares); everything else goes to stderr. Exit 0 ready, 1 this node
    cannot serve the job (one line says why), 2 invalid input. INVENTORY defaults to
    $GPURIG_INVENTORY or inventories/*.yaml."""
    _up_usage(inventories, local, as_host, spec_file)
    paths = list(inventories)
    if as_host is not None and not paths:
        from gpurig.remote.converge import DEPLOY_ROOT
        from gpurig.remote.pyinfra_inventory import inventory_paths

        paths = [str(p) for p in inventory_paths(DEPLOY_ROOT)]
    from gpurig.node.command import up_here

    raise SystemExit(up_here(paths, as_host, spec_file))


def _up_usage(
    inventories: tuple[str, ...], local: bool, as_host: str | None, spec_file: str | None
) -> None:
    if not local:
        raise click.UsageError("up converges the machine it runs on: give --local")
    if (as_host is None) == (spec_file is None):
        raise click.UsageError("up needs one of --as NAME or --spec FILE")
    if spec_file is not None and inventories:
        raise click.UsageError("--spec FILE replaces INVENTORY: give one of them")


@main.command()
@click.argument("inventories", nargs=-1, required=True, metavar="INVENTORY...",
                type=click.Path(dir_okay=False))  # fmt: skip
@click.option("--limit", "limits", multiple=True, metavar="NAME",
              help="Only this host or group (repeat).")  # fmt: skip
@click.option("--dry", is_flag=True, help="Say what would change; change nothing.")
@click.option("-y", "--yes", is_flag=True,
              help="Change without asking first (implied where there is no terminal).")  # fmt: skip
@click.option("--data", "data", multiple=True, metavar="KEY=VALUE",
              help="A deploy setting, e.g. allow_recreate=true (repeat).")  # fmt: skip
@CONNECT_RETRIES
def converge(
    inventories: tuple[str, ...],
    limits: tuple[str, ...],
    dry: bool,
    yes: bool,
    data: tuple[str, ...],
    retries: int,
) -> None:
    """Bring hosts to their declared state: gpurig's deploy run by pyinfra, with the same
    operations, refusals and exit statuses as `pyinfra inventory.py deploys/gpu_host.py` in a
    checkout. A second run changes nothing. Exit 2 for invalid input, before any host is
    touched; otherwise pyinfra's own status (0 when every host converged)."""
    import os

    from gpurig.spec.inventory import InventoryError, load_inventory

    try:
        inventory = load_inventory(list(inventories))
    except InventoryError as exc:
        click.echo(str(exc), err=True)
        raise SystemExit(2) from None
    known = {h.name for h in inventory.hosts} | set(inventory.groups())
    unknown = [name for name in limits if name not in known]
    if unknown:
        click.echo(f"{', '.join(inventories)}: no host or group named {', '.join(unknown)}",
                   err=True)  # fmt: skip
        raise SystemExit(2)
    bad = [word for word in data if "=" not in word or word.startswith("=")]
    if bad:
        raise click.BadParameter(f"{bad[0]!r} is not KEY=VALUE", param_hint="--data")
    chosen = [h for h in inventory.hosts
              if not limits or h.name in limits or set(h.groups) & set(limits)]  # fmt: skip
    _keys_load(chosen, passphrase_asked=sys.stdin.isatty())  # pyinfra asks on a terminal
    from gpurig.remote.converge import inventory_env, pyinfra_argv

    flags = ["--dry"] if dry else []
    if yes or not sys.stdin.isatty():  # pyinfra's prompt would wait for an answer nobody gives
        flags.append("-y")
    argv = pyinfra_argv(limit=limits, data=data, flags=flags)
    sys.stdout.flush()
    os.execve(argv[0], argv, {**inventory_env(inventories), retry.ENV_VAR: str(retries)})


def _confirm(question: str) -> bool:
    """click.confirm, where no answer (stdin closed) means no."""
    try:
        return click.confirm(question, default=False)
    except click.Abort:
        return False


@main.command()
@click.argument("address")
@click.option("--name", required=True, help="The host's name in the inventory and reports.")
@click.option(
    "--inventory",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The inventory file that gets the host (edited in place, comments kept).",
)
@click.option("--port", type=click.IntRange(1, 65535), help="SSH port  [default: 22]")
@click.option("--user", help="Login user (or ADDRESS as user@host); else the inventory's.")
@click.option("--key", help="Private key file; else the inventory's default key.")
@click.option("--group", "groups", multiple=True, metavar="G", help="Inventory group (repeat).")
@click.option("--yes", is_flag=True, help="Trust a new host key without asking.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds to reach SSH, and for the host to reach each source its spec needs.",
)
@MARGIN
def onboard(
    address: str,
    name: str,
    inventory: Path,
    port: int | None,
    user: str | None,
    key: str | None,
    groups: tuple[str, ...],
    yes: bool,
    timeout: float,
    margin: float,
) -> None:
    """Take a fresh rental to converged, verified and accepted, and record it in INVENTORY.

    Preflight is read-only; a refusal names its step (preflight, record, converge, verify,
    accept). The last line is the verdict and the command to run next. Exit 0 onboarded
    (a host without a GPU that does not require one included), 1 refused, 2 a private key
    that cannot be loaded here (said before the host is contacted).
    """
    # Imported here: the console script (gpurig.cli.entry) has patched gevent in by now.
    from gpurig.onboard.onboard import OnboardError, Request, failure_verdict, success_verdict
    from gpurig.onboard.onboard import onboard as run_onboard
    from gpurig.remote.key_load import KeyRefused

    request = Request(address, name, inventory, port, user, key, groups, timeout, yes, margin / 100)
    try:
        done = run_onboard(request, confirm=_confirm, echo=click.echo)
    except KeyRefused as exc:
        click.echo(str(exc), err=True)
        raise SystemExit(2) from None
    except OnboardError as exc:
        click.echo(f"{exc}\n{failure_verdict(exc, request)}", err=True)
        raise SystemExit(1) from None
    click.echo(success_verdict(done, request))


@main.command()
@click.argument("host", required=False)
@click.option(
    "--inventory",
    "inventories",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="Inventory file (repeat); else $GPURIG_INVENTORY or inventories/*.yaml.",
)
@click.option(
    "--group",
    metavar="GROUP",
    help="Instead of HOST: run nccl-tests' all_reduce_perf across every host of this inventory "
    "group, by mpirun from its first host (in that host's GPU container, or the image "
    "spec.acceptance.nccl_image pins), and record it.",
)
@MARGIN
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def accept(
    host: str | None, inventories: tuple[str, ...], group: str | None, margin: float, fmt: str
) -> None:
    """Measure HOST's GPU (CUDA, a checked matmul, TFLOPS, memory bandwidth, an NCCL
    all-reduce across its GPUs, dcgmi diag -r 1) against its model's baseline and record the
    figures; or, with --group, an NCCL all-reduce across the group's hosts.

    Exit 0 passed, or nothing to judge (no GPU on a host whose spec does not require one, no
    baseline for the model or across hosts, no torch to measure with); 1 failed, or a host
    of the group lists no GPU; 2 bad input (a group that cannot run it: fewer than two hosts,
    a host with gpu: absent, nowhere to run mpirun)."""
    from gpurig.remote.converge import DEPLOY_ROOT
    from gpurig.remote.pyinfra_inventory import inventory_paths
    from gpurig.spec.inventory import InventoryError, load_inventory

    if (host is None) == (group is None):
        click.echo("name one HOST, or a group with --group", err=True)
        raise SystemExit(2)
    paths = list(inventories) or inventory_paths(DEPLOY_ROOT)
    try:
        inventory = load_inventory(paths)
    except InventoryError as exc:
        click.echo(str(exc), err=True)
        raise SystemExit(2) from None
    if group is not None:
        _accept_group(inventory, group, paths, fmt)
    found = next((h for h in inventory.hosts if h.name == host), None)
    if found is None:
        click.echo(f"{', '.join(map(str, paths))}: no host named {host}", err=True)
        raise SystemExit(2)
    # Imported here: the console script (gpurig.cli.entry) has patched gevent in by now.
    from gpurig.onboard import accept as acceptance
    from gpurig.remote.pyinfra_inventory import cache_dir

    _keys_load([found])
    accepted = acceptance.measure(found, cache_dir(), margin / 100)
    saved = acceptance.save(found, accepted)
    click.echo(acceptance.render(found, accepted, fmt), nl=False)
    click.echo(f"recorded in {saved}", err=True)
    raise SystemExit(1 if accepted.failed else 0)


def _accept_group(inventory: Any, group: str, paths: list[Any], fmt: str) -> None:
    """`accept --group`: refused (2) before any host is touched where the inventory rules it
    out, (1) where a host lists no GPU; else measured, recorded and reported."""
    from gpurig.read.nccl_group import Refused, check_specs

    members = inventory.groups().get(group)
    if members is None:
        known = ", ".join(sorted(inventory.groups())) or "none"
        click.echo(
            f"{', '.join(map(str, paths))}: no host is in a group named {group}; "
            f"groups with hosts: {known}",
            err=True,
        )
        raise SystemExit(2)
    hosts = [h for h in inventory.hosts if h.name in members]
    try:
        check_specs(group, [(h.name, h.spec) for h in hosts])
    except Refused as exc:
        click.echo(f"accept --group refused: {exc}", err=True)
        raise SystemExit(2) from None
    # Imported here: the console script (gpurig.cli.entry) has patched gevent in by now.
    from gpurig.onboard import accept_group
    from gpurig.remote.pyinfra_inventory import cache_dir

    _keys_load(hosts)
    try:
        accepted = accept_group.measure_group(group, hosts, cache_dir())
    except Refused as exc:
        click.echo(f"accept --group refused: {exc}", err=True)
        raise SystemExit(1) from None
    saved = accept_group.save(hosts[0], accepted)
    click.echo(accept_group.render(hosts[0], accepted, fmt), nl=False)
    click.echo(f"recorded in {saved}", err=True)
    raise SystemExit(1 if accepted.failed else 0)


@main.command("ssh-config")
@click.argument("inventories", nargs=-1, required=True, metavar="INVENTORY...")
def ssh_config(inventories: tuple[str, ...]) -> None:
    """Print an ssh_config for the inventory's hosts, host keys checked against the recorded
    ones: for plain ssh, and for testinfra's ssh:// backend (pytest tests/verify
    --ssh-config FILE). Exit 2 on an invalid inventory."""
    from gpurig.remote.pyinfra_inventory import cache_dir
    from gpurig.remote.pyinfra_inventory import ssh_config as config
    from gpurig.spec.inventory import InventoryError, load_inventory

    try:
        inventory = load_inventory(inventories)
    except InventoryError as exc:
        click.echo(str(exc), err=True)
        raise SystemExit(2) from None
    click.echo(config(inventory.hosts, cache_dir()), nl=False)


@main.command()
@click.argument("inventory", type=click.Path(exists=True, dir_okay=False))
@click.option("--check", is_flag=True, help="Change nothing; exit 1 listing unpinned images.")
def pin(inventory: str, check: bool) -> None:
    """Resolve image tags to registry digests in INVENTORY, keeping its comments and layout.

    Exit 0 pinned, 1 a registry failed (or --check found tags), 2 the file is not YAML."""
    from gpurig.onboard.pin import PinError, PinInputError, pin_file, read_inventory, unpinned
    from gpurig.spec.inventory import format_path
    from gpurig.spec.textsafe import visible
    from gpurig.spec.words import counted

    path = Path(inventory)
    try:
        if check:
            found = unpinned(read_inventory(path), inventory)
        else:
            resolved = pin_file(path)
    except PinInputError as exc:
        click.echo(str(exc), err=True)
        raise SystemExit(2) from None
    except PinError as exc:
        # Registries are remote input: their words reach the terminal escaped.
        click.echo(f"gpurig pin: {visible(str(exc))}", err=True)
        raise SystemExit(1) from None
    if check:
        for item in found:
            click.echo(
                f"{inventory}:{item.line}: {format_path(item.path)}: not pinned: {item.image}"
            )
        if found:
            click.echo(f"{counted(len(found), 'unpinned image')}; run `gpurig pin {inventory}`",
                       err=True)  # fmt: skip
        raise SystemExit(1 if found else 0)
    for tag, digest in resolved.items():
        click.echo(f"{tag} -> {digest}")
    if not resolved:
        click.echo("every image is already pinned")


@main.command()
@click.argument("finding_id", metavar="ID", required=False)
@click.option("--list", "as_list", is_flag=True, help="List every id with its one-line summary.")
@click.pass_context
def explain(ctx: click.Context, finding_id: str | None, as_list: bool) -> None:
    """Explain a finding's id, as drift reports it: what it means, why it matters, what to do.

    Exit 0, or 2 for an id no run reports (--list shows them all)."""
    from gpurig.report import explain as catalogue

    if as_list == (finding_id is not None):
        raise click.UsageError("give one of ID or --list")
    if as_list:
        click.echo(catalogue.listing(), nl=False)
        return
    try:
        found = catalogue.entry(str(finding_id))
    except catalogue.UnknownId:
        near = catalogue.nearest(str(finding_id))
        hint = f"did you mean {', '.join(near)}? " if near else ""
        click.echo(f"gpurig explain: no finding {finding_id!r}; {hint}see `gpurig explain --list`",
                   err=True)  # fmt: skip
        ctx.exit(2)
    click.echo(catalogue.as_text(found), nl=False)


@main.command()
@click.argument("ids", nargs=-1, metavar="[ID]...")
@click.option("--all", "every", is_flag=True, help="Every kernel-log id (Xid, SXid, ...).")
@click.pass_context
def ack(ctx: click.Context, ids: tuple[str, ...], every: bool) -> None:
    """Say the kernel-log events seen so far on this node are handled (root, on the node).

    The node contracts then leave out the events of these ids (gpu.xid, gpu.sxid,
    gpu.hung_task, gpu.fallen_off_bus) logged up to now, on this boot: a node fixed by a GPU
    reset can be resumed without a reboot. Recorded in /var/lib/gpurig/ack.json. Exit 0, 2
    for an unknown id, without root, or when the kernel log cannot be read."""
    import os

    from gpurig.node import ack as acks

    if every == bool(ids):
        raise click.UsageError("give the ids to acknowledge, or --all")
    unknown = sorted(set(ids) - set(acks.KERNEL_LOG_IDS))
    if unknown:
        raise click.UsageError(f"not a kernel-log id: {', '.join(unknown)}; "
                               f"one of {', '.join(acks.KERNEL_LOG_IDS)}")  # fmt: skip
    if os.geteuid() != 0:
        click.echo("gpurig ack: run as root on the node", err=True)
        ctx.exit(2)
    try:
        lines = acks.run(ids or acks.KERNEL_LOG_IDS, time.time())
    except OSError as exc:
        click.echo(f"gpurig ack: {exc}", err=True)
        ctx.exit(2)
    click.echo("\n".join(lines))


if __name__ == "__main__":
    main()
