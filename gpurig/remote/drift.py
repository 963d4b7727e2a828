"""`gpurig drift` over SSH: every host read in parallel through pyinfra's API (one remote
command per host), then judged by gpurig.checks.judge. An unreachable host or one whose output
cannot be parsed becomes a finding, never a crash: a CI job must see the whole fleet's report even
when one box is down or odd."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from pyinfra.api import Config, Inventory, State
from pyinfra.api.exceptions import ConnectError, PyinfraError
from pyinfra.api.host import Host as PyinfraHost

from gpurig.checks import judge as drift
from gpurig.checks.judge import SUDO_PASSWORD, Probed, drift_reads, report
from gpurig.facts.round_trip import HostState, Read
from gpurig.remote import early, pyinfra_guard, retry
from gpurig.remote.pyinfra_inventory import pyinfra_hosts
from gpurig.spec.finding import HostReport
from gpurig.spec.inventory import Host

# A further read on the same connection, given what the first one found (onboarding's reach).
Then = Callable[[PyinfraHost, dict[str, Any]], dict[str, Any]]


def _refused(host: PyinfraHost) -> str | None:
    """Why pyinfra_guard refused this host's command (sudo's prompt, an output flood)."""
    if host.connector_data.get(pyinfra_guard.SUDO_REFUSED):
        return SUDO_PASSWORD
    return host.connector_data.get(pyinfra_guard.FLOODED)


def connect(
    host: PyinfraHost, retries: int, dialled: early.Dialled | None = None
) -> tuple[int, str | None]:
    """Connect `host`, trying again up to `retries` times where it blinked (gpurig.remote.retry);
    how many tries it took, and the last error where none connected. The first try takes the
    connection `dialled` before pyinfra loaded (gpurig.remote.early)."""
    tried = 0
    while True:
        tried += 1
        try:
            with early.handed(host.connector, dialled if tried == 1 else None) as timed_out:
                if timed_out:
                    raise ConnectError(timed_out)
                host.connect(show_errors=False, raise_exceptions=True)
            return tried, None
        except PyinfraError as exc:  # ConnectError, or what pyinfra refuses before (a key file)
            error = str(exc.args[0])
            if tried > retries or not retry.blinked(error):
                return tried, error
        time.sleep(retry.pause(tried))  # gevent's patched sleep: the other hosts go on


def _read_host(
    host: PyinfraHost,
    reads: list[Read],
    sudo: bool | None,
    then: Then | None = None,
    timeout: int | None = None,
    bound: int | None = None,
    retries: int = retry.RETRIES,
    dialled: early.Dialled | None = None,
) -> tuple[dict[str, Any] | None, str | None, int]:
    tries, error = connect(host, retries, dialled)
    if error is not None:
        return None, error, tries
    # None: the host's data decides (sudo for a non-root login); onboard probes as the login.
    arguments = {} if sudo is None else {"_sudo": sudo}
    try:
        state = host.get_fact(
            HostState,
            reads=reads,
            **({} if bound is None else {"bound": bound}),
            _timeout=timeout or drift.PROBE_TIMEOUT,  # read at call time (tests shorten it)
            _ignore_errors=True,
            **arguments,
        )
        refused = _refused(host)
        if refused is None and then is not None:
            state = then(host, state)
            refused = _refused(host)
        if refused is not None:
            return None, refused, tries
    except (OSError, EOFError) as exc:  # the host died mid-command: its failure only
        return None, f"connection lost: {exc or type(exc).__name__}", tries
    finally:
        host.disconnect()
    return state, None, tries


def _prepare_pyinfra() -> None:
    """gpurig's guards on pyinfra's run (pyinfra_guard); pyinfra and paramiko log connection
    and fact errors themselves, and they are findings here."""
    pyinfra_guard.install()
    for name in ("pyinfra", "paramiko"):
        logging.getLogger(name).addHandler(logging.NullHandler())
        logging.getLogger(name).propagate = False


def probe_hosts(
    hosts: Sequence[Host],
    cache: Path,
    progress: TextIO | None = None,
    sudo: bool | None = None,
    reads: Callable[[Mapping[str, Any]], list[Read]] = drift_reads,
    then: Then | None = None,
    retries: int = retry.RETRIES,
    dialled: Mapping[str, early.Dialled] | None = None,
) -> list[Probed]:
    """Connect (strict host keys) and read `hosts` in parallel; results in inventory order.
    `dialled`: connections opened early to some of them, by name (gpurig.remote.early)."""
    dialled = dialled or {}
    inventory = Inventory((pyinfra_hosts(hosts, cache), {}))
    # pyinfra's own parallelism, as the converge has it: min(20 per CPU, hosts, what the
    # open-files limit allows). All hosts at once made 300 key exchanges queue for one
    # process's CPU: 61 of 300 hosts at 150 ms failed them ("No existing session").
    state = State(inventory, Config())
    _prepare_pyinfra()

    def probe(host: Host) -> Probed:
        pyinfra_host = inventory.get_host(host.name)
        read = reads(host.spec)
        started = dialled.get(host.name)
        return Probed(
            host, *_read_host(pyinfra_host, read, sudo, then, retries=retries, dialled=started)
        )

    done: dict[str, Probed] = {}
    try:
        for result in state.pool.imap_unordered(probe, hosts):
            done[result.host.name] = result
            if progress is not None:
                progress.write(f"\r[{len(done)}/{len(hosts)}] {result.host.name}\033[K")
                progress.flush()
    finally:  # what was not handed over (or was, and is done with)
        for started in dialled.values():
            started.sock.close()
    if progress is not None:
        progress.write("\n")
    return [done[h.name] for h in hosts]


def run_drift(
    hosts: Sequence[Host],
    cache: Path,
    progress: TextIO | None = None,
    retries: int = retry.RETRIES,
    dialled: Mapping[str, early.Dialled] | None = None,
) -> list[HostReport]:
    """Read and judge `hosts` in parallel; reports in inventory order."""
    probed = probe_hosts(hosts, cache, progress, retries=retries, dialled=dialled)
    return [report(r) for r in probed]


def progress_stream() -> TextIO | None:
    """stderr when a person is watching it; CI logs get no progress noise."""
    return sys.stderr if sys.stderr.isatty() else None
