"""The Docker Compose v2 plugin (`compose`): downloaded, checked against the declared sha256,
then renamed into the docker CLI's plugin directory; a download that does not match never
lands there."""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra.api import deploy, operation

from gpurig.deploys.changes import apply
from gpurig.deploys.packages import install
from gpurig.deploys.snapshot import read
from gpurig.plans import compose as plan
from gpurig.plans.change import Change
from gpurig.plans.compose import PLUGIN


def fetch_plugin(url: str, sha256: str, path: str = PLUGIN) -> str:
    """Download to a private directory, check the sha256 there, then rename into place: a
    failed or mismatching download leaves the installed plugin as it was."""
    q_url, q_path = shlex.quote(url), shlex.quote(path)
    new = shlex.quote(f"{path}.gpurig-new")
    return (
        f'tmp=$(mktemp -d) && curl -fsSL --retry 3 -o "$tmp/plugin" {q_url} && '
        f'echo "{sha256}  $tmp/plugin" | sha256sum --check --quiet - && '
        f'install -D -m 755 "$tmp/plugin" {new} && mv -f {new} {q_path}; '
        'rc=$?; rm -rf "$tmp"; exit $rc'
    )


def commands(change: Change) -> list[str]:
    if change.id == "packages.missing":
        return [install(change)]
    return [fetch_plugin(change.data["url"], change.data["sha256"])]


@operation()
def compose_plugin(spec: dict[str, Any]):
    """Install the declared compose plugin where it is missing or another build."""
    version = spec["compose"]["version"]
    yield from apply(plan.plan(spec, read), f"docker compose {version} installed", commands)


@deploy("Docker Compose plugin")
def compose(spec: dict[str, Any]) -> None:
    if spec.get("compose"):
        compose_plugin(name=f"Install docker compose {spec['compose']['version']}", spec=spec)
