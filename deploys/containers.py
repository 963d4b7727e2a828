"""Declared containers (`containers`): created, started or recreated as gpurig.plans.containers
decides; a running container with drift is recreated only with the opt-in."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from typing import Any

from gpurig.deploys.changes import start
from gpurig.deploys.snapshot import read
from pyinfra.api import HiddenValue, QuoteString, StringCommand, deploy, operation

from gpurig.plans import containers as plan
from gpurig.redact import redacted


def run_command(argv: list[str], env: str = "") -> StringCommand:
    """`ENGINE run ...`, each word quoted, after `env` (the user's engine variables, in user
    scope); an `--env` credential (gpurig.redact) is shown as pyinfra's mask where it prints
    commands (-vv), and sent to the host as it is."""

    def word(flag: str, arg: str) -> QuoteString:
        key, _, value = arg.partition("=")
        secret = flag == "--env" and redacted(key, value) != value
        return QuoteString(HiddenValue(arg) if secret else arg)

    words = [word(flag, arg) for flag, arg in zip(["", *argv], argv, strict=False)]
    # `run -d` over OpenSSH keeps the session open while conmon holds stdout: redirect it.
    return StringCommand(*([env] if env else []), *words, ">/dev/null")


def _create(data: dict[str, Any], remove: bool) -> Iterator[str | StringCommand]:
    env = f"{data['env']} " if data["env"] else ""
    engine, name = f"{env}{data['engine']}", shlex.quote(data["container"])
    if remove:
        yield f"{engine} rm --force {name}"
    yield f"{env}{shlex.join([data['engine'], 'pull', data['image']])} >/dev/null"
    yield run_command(data["argv"], data["env"])
    if data["gpu_check"]:
        message = (
            f"gpurig: GPU not visible inside container {data['container']} (nvidia-smi failed)"
        )
        yield (
            f"{engine} exec {name} nvidia-smi -L >/dev/null "
            f"|| {{ echo {shlex.quote(message)} >&2; exit 1; }}"
        )


@operation()
def declared_container(spec: dict[str, Any], container: str, allow_recreate: bool = False):
    """Create the container if missing, start it if stopped, recreate it if it drifted and
    its policy allows."""
    changes = plan.plan(spec, read, allow_recreate)
    changes = [c for c in changes if c.data.get("container", container) == container]
    if not start(changes, f"container {container} matches its spec and is running"):
        return
    done: set[str] = set()
    for change in changes:
        data = change.data
        if data["container"] in done:
            continue
        done.add(data["container"])
        if data.get("start"):
            env = f"{data['env']} " if data["env"] else ""
            yield f"{env}{data['engine']} start {shlex.quote(data['container'])} >/dev/null"
        else:
            yield from _create(data, remove=bool(data.get("recreate")))


@deploy("Containers")
def containers(spec: dict[str, Any], allow: bool = False) -> None:
    if not spec["containers"]:
        return
    for container in spec["containers"]:
        declared_container(name=f"Container {container}", spec=spec, container=container,
                           allow_recreate=allow)  # fmt: skip
