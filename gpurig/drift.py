"""`gpurig drift`: probe every host in parallel through pyinfra's API, then evaluate.

One fact per host (facts/probe.py), connections with strict host keys (pyinfra_inventory), and
an unreachable host or a failed probe becomes a finding, never a crash: a CI job must see the
whole fleet's report even when one box is down.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pyinfra.api import Config, Inventory, State
from pyinfra.api.exceptions import ConnectError
from pyinfra.api.host import Host as PyinfraHost

from deploys.core_dumps import MANAGED_FILES
from facts.probe import Probe
from gpurig.compat import Finding
from gpurig.evaluate import evaluate, key_changed, rules, unreachable
from gpurig.hostkeys import is_mismatch
from gpurig.inventory import Host, repo_venv
from gpurig.pyinfra_inventory import host_data, write_known_hosts
from gpurig.report import HostReport

PROBE_TIMEOUT = 120  # seconds for the whole script; engines and GPUs can be slow to answer


def probe_kwargs(spec: dict[str, Any], toolkit_packages: Sequence[str]) -> dict[str, Any]:
    """What the probe must look at for this spec: declared containers, repos, paths, files."""
    repos = spec.get("repos") or {}
    return {
        "engine": spec.get("engine"),
        "paths": ["/tmp", *repos],
        "core_dirs": ["/", "/tmp", *repos],
        "hash_files": list(MANAGED_FILES),
        "containers": list(spec.get("containers") or {}),
        "repos": {path: (repo.get("python") or {}).get("lockfile") for path, repo in repos.items()},
        "packages": list(toolkit_packages) if spec.get("nvidia_toolkit") else [],
        "venvs": {path: venv for path, repo in repos.items() if (venv := repo_venv(path, repo))},
    }


@dataclass(frozen=True)
class Probed:
    """One host's probe, or the connection error that kept it from being taken."""

    host: Host
    probe: dict[str, Any] | None
    connect_error: str | None = None


def connect_failure(host: Host, error: str) -> Finding:
    """`host.key_changed` when the recorded host key was refused, else `host.unreachable`."""
    return key_changed(host.name, host.source, error) if is_mismatch(error) else unreachable(error)


def _probe_host(
    host: PyinfraHost, spec: dict[str, Any], packages: Sequence[str], sudo: bool | None
) -> tuple[dict[str, Any] | None, str | None]:
    try:
        host.connect(show_errors=False, raise_exceptions=True)
    except ConnectError as exc:
        return None, str(exc.args[0])
    # None: the host's data decides (sudo for a non-root login); onboard probes as the login.
    arguments = {} if sudo is None else {"_sudo": sudo}
    try:
        probe = host.get_fact(
            Probe,
            **probe_kwargs(spec, packages),
            _timeout=PROBE_TIMEOUT,
            _ignore_errors=True,
            **arguments,
        )
    finally:
        host.disconnect()
    return probe, None


def probe_hosts(
    hosts: Sequence[Host],
    cache: Path,
    progress: TextIO | None = None,
    sudo: bool | None = None,
) -> list[Probed]:
    """Connect (strict host keys) and probe `hosts` in parallel; results in inventory order."""
    known_hosts = write_known_hosts(hosts, cache)
    inventory = Inventory(([(h.name, host_data(h, known_hosts)) for h in hosts], {}))
    state = State(inventory, Config(PARALLEL=max(1, len(hosts))))
    # pyinfra and paramiko log connection and fact errors themselves; they are findings here.
    for name in ("pyinfra", "paramiko"):
        logging.getLogger(name).addHandler(logging.NullHandler())
        logging.getLogger(name).propagate = False
    packages = rules()["toolkit_packages"]

    def probe(host: Host) -> Probed:
        pyinfra_host = inventory.get_host(host.name)
        return Probed(host, *_probe_host(pyinfra_host, host.spec, packages, sudo))

    done: dict[str, Probed] = {}
    for result in state.pool.imap_unordered(probe, hosts):
        done[result.host.name] = result
        if progress is not None:
            progress.write(f"\r[{len(done)}/{len(hosts)}] {result.host.name}\033[K")
            progress.flush()
    if progress is not None:
        progress.write("\n")
    return [done[h.name] for h in hosts]


def run_drift(
    hosts: Sequence[Host], cache: Path, progress: TextIO | None = None
) -> list[HostReport]:
    """Probe and evaluate `hosts` in parallel; reports in inventory order."""
    reports = []
    for result in probe_hosts(hosts, cache, progress):
        name = result.host.name
        if result.connect_error is not None:
            reports.append(
                HostReport(name, False, [connect_failure(result.host, result.connect_error)])
            )
        else:
            reports.append(HostReport(name, True, evaluate(result.host.spec, result.probe)))
    return reports


def progress_stream() -> TextIO | None:
    """stderr when a person is watching it; CI logs get no progress noise."""
    return sys.stderr if sys.stderr.isatty() else None
