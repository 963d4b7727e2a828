"""Declared containers (`containers`): created, started or recreated as gpurig.plans.containers
decides; a running container with drift is recreated only with the opt-in."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from typing import Any

from pyinfra.api import QuoteString, StringCommand, deploy, operation

from gpurig.deploys import writes
from gpurig.deploys.changes import start
from gpurig.deploys.snapshot import read
from gpurig.plans import containers as plan
from gpurig.spec.container import env_file_content, run_argv


def run_command(data: dict[str, Any], stage: str) -> StringCommand:
    """`ENGINE run ...` (after `env`: the user's engine variables, in user scope), each word
    quoted, its environment read from the env file in `stage`; the stage is removed right after
    the run, whether it succeeded or not, and the command exits with the run's status."""
    argv = run_argv(data["engine"], data["container"], data["spec"], f"{stage}/upload")
    env = [data["env"]] if data["env"] else []
    return StringCommand(
        *env,
        *(QuoteString(word) for word in argv),
        # `run -d` over OpenSSH keeps the session open while conmon holds stdout: redirect it.
        f">/dev/null; rc=$?; rm -rf {shlex.quote(stage)}; exit $rc",
    )


def _create(data: dict[str, Any], remove: bool) -> Iterator[object]:
    env = f"{data['env']} " if data["env"] else ""
    engine, name = f"{env}{data['engine']}", shlex.quote(data["container"])
    if remove:
        yield f"{engine} rm --force {name}"
    yield f"{env}{shlex.join([data['engine'], 'pull', data['image']])} >/dev/null"
    # The environment travels as an upload, never on a command line (`ps` shows those to
    # every account on the host), and is on the host only for the run.
    stage, steps = writes.stage(env_file_content(data["spec"]["env"]))
    yield from steps
    yield run_command(data, stage)
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
