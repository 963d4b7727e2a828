"""`gpurig up --local`: the first line of a job script. It brings the machine it runs on to
its declared state (the converge's own deploy, run by pyinfra's @local connector), then says
what the job needs to know: the `export` lines for the user's Podman socket on stdout (for
the job to `eval`; exit 1 first, so `ready=$(gpurig up ...) || exit 1` stops the job: an
`eval "$(...)"` of nothing succeeds), or one line on stderr naming why the node cannot serve
the job (an error finding: GPU missing, slices wrong, torch unable to run on this GPU).

The same read drift makes comes first: on a converged node that read is all `up` does.
One `up` at a time per user and node (two jobs starting together): the converge's own lock,
waited for."""

from __future__ import annotations

import contextlib
import os
import pwd
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from gpurig import DEPLOY_ROOT
from gpurig.named_tuple import NamedTuple
from gpurig.node.ahead import Ahead
from gpurig.read.bounds import PROBE_TIMEOUT
from gpurig.root_env import SLURM_OWN, allowed
from gpurig.safe_path import walk
from gpurig.spec.user_scope import is_user

if TYPE_CHECKING:
    from gpurig.checks.judge import Probed
    from gpurig.spec.finding import HostReport
    from gpurig.spec.inventory import Host

LOCK_WAIT = 300.0  # seconds one `up` waits for another's converge on this node


class UpError(Exception):
    """The node cannot serve the job; str() is the one-line reason."""


class Ready(NamedTuple):
    """What `up` found once done: the shell lines for the job, and the report."""

    exports: list[str]
    report: HostReport
    converged: bool


@contextlib.contextmanager
def root_environment() -> Iterator[None]:
    """As root, what drift's read does in its shell (facts/round_trip.py), for `up`'s lock and
    converge too: the environment built from the allow-list (gpurig.root_env), with a HOME
    that root alone can change (else root's own), `/` as the working directory. The caller's
    PATH entry, directory, HOME or any variable may be another account's: no place to start
    root's commands from."""
    saved, cwd = dict(os.environ), os.getcwd()
    home = walk(os.environ.get("HOME") or "/nonexistent")
    root_home = home.checked if home.root_only and os.path.isdir(home.checked) else None
    env = allowed(saved, root_home or pwd.getpwuid(0).pw_dir, SLURM_OWN)
    os.environ.clear()
    os.environ.update(env)
    os.chdir("/")
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        os.chdir(cwd)


@contextlib.contextmanager
def node_lock(spec: Mapping[str, Any], wait: float = LOCK_WAIT) -> Iterator[None]:
    """Hold the converge lock of this node (the user's own with scope: user), waiting while
    another converge holds it: the command deploys/lock.py runs over SSH, run here."""
    from gpurig.node.lock import BUSY, hold_command, not_own

    deadline = time.monotonic() + wait
    while True:
        held = subprocess.Popen(
            ["sh", "-c", hold_command(dict(spec), sudo=False)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert held.stdout is not None and held.stdin is not None
        answer = held.stdout.readline(320).strip()
        if answer == "held":
            break
        _, said = held.communicate()
        if held.returncode != BUSY:
            last = said.strip().splitlines()[-1:] or [f"exit {held.returncode}"]
            raise UpError(not_own(answer) or f"could not take this node's converge lock: {last[0]}")
        if time.monotonic() > deadline:
            raise UpError(f"another converge held this node's lock for over {wait:.0f} s")
        time.sleep(1)
    try:
        yield
    finally:
        held.stdin.close()
        held.wait()


class Failed(NamedTuple):
    """How a converge failed: the first error it gave, and whether that was a plan's refusal
    (which the read after it reports in drift's words) rather than a failed command."""

    said: str
    refused: bool


def converge_local(spec: Mapping[str, Any]) -> Failed | None:
    """Run deploys/gpu_host.py on this machine through pyinfra's @local connector; None when
    every operation succeeded, else how it failed.
    pyinfra's output is kept from stdout (the job's) and given to stderr after a success
    (after a failure the one line `up` says is the job's to see). The node's read came first
    without pyinfra; only now, with something to change, is it loaded (gevent's patch first,
    as the console script does for SSH commands)."""
    import io
    import logging

    from gpurig.remote.cooperative import patch

    patch()
    from pyinfra.api import Config, Inventory, State
    from pyinfra.api.connect import connect_all
    from pyinfra.api.exceptions import PyinfraError
    from pyinfra.api.operations import run_ops
    from pyinfra.api.state import StateStage
    from pyinfra.context import ctx_config, ctx_inventory, ctx_state
    from pyinfra_cli.util import load_deploy_file

    from gpurig.remote.pyinfra_guard import install

    install()
    log = logging.getLogger("pyinfra")
    said = io.StringIO()
    handler = logging.StreamHandler(said)
    handler.setLevel(logging.WARNING)
    log.addHandler(handler)
    inventory = Inventory(([("@local", {"spec": dict(spec)})], {}))
    config = Config()
    state = State(inventory, config)
    failed = None
    try:
        with (
            contextlib.redirect_stdout(said),
            ctx_config.use(config),
            ctx_inventory.use(inventory),
            ctx_state.use(state),
        ):
            state.set_stage(StateStage.Connect)
            connect_all(state)
            state.set_stage(StateStage.Prepare)
            load_deploy_file(state, os.path.join(DEPLOY_ROOT, "deploys", "gpu_host.py"))
            state.set_stage(StateStage.Execute)
            run_ops(state)
    except PyinfraError as exc:  # a refusal, or every host (this one) failed: "No hosts remaining!"
        failed = exc
    finally:
        log.removeHandler(handler)
    lines = [line.strip() for line in said.getvalue().splitlines() if line.strip()]
    if failed is None and not state.failed_hosts:
        sys.stderr.writelines(f"{line}\n" for line in lines)
        return None
    if failed is not None and str(failed) != "No hosts remaining!":
        return Failed(str(failed), refused=True)  # a refusal, in the plan's words
    # A failed command: pyinfra logs its output, each line behind the host's name.
    said_lines = [line.removeprefix("[@local]").strip() for line in lines]
    return Failed(next((line for line in said_lines if line), "an operation failed"), False)


def socket_of(spec: Mapping[str, Any], probed: Probed) -> str | None:
    """The Podman API socket the spec declares, as this node has it; None when none."""
    from gpurig.facts.gpurig_user import UserPodman
    from gpurig.facts.round_trip import Snapshot
    from gpurig.plans.engine import PODMAN_SOCKET

    if spec["engine"] != "podman" or not spec["podman_socket"]:
        return None
    if not is_user(spec):
        return PODMAN_SOCKET
    state = Snapshot(probed.state or {})(UserPodman)
    return f"{state['runtime_dir']}/podman/podman.sock"


def exports(socket: str | None) -> list[str]:
    """`export` lines that point the docker CLI, the Docker SDK and podman at the socket."""
    if socket is None:
        return []
    url = shlex.quote(f"unix://{socket}")
    return [f"export DOCKER_HOST={url}", f"export CONTAINER_HOST={url}"]


def reason(result: HostReport) -> str | None:
    """One line for the first error finding (what cannot serve the job), or None."""
    if not result.reachable:
        return result.findings[0].message if result.findings else "this machine was not read"
    first = next((f for f in result.findings if f.severity == "error"), None)
    if first is None:
        return None
    detail = f" (expected {first.expected}, got {first.actual})" if first.actual else ""
    return f"{first.id}: {first.message}{detail}"


def up(host: Host, say: Callable[[str], None], source: bytes | None = None) -> Ready:
    """Converge this machine as `host` when its read shows a change, then judge it; raises
    UpError naming why the node cannot serve the job. `source`: the bytes of the file `host`
    came from, for the read its spec made last time (gpurig.node.ahead), started under the
    lock while the judge is loaded: on a converged node that read is most of `up`."""
    spec = host.spec
    if not is_user(spec) and os.geteuid() != 0:
        raise UpError(
            f"scope: system changes the whole node and needs root (this is uid {os.geteuid()}); "
            "a cluster user declares scope: user"
        )
    scoped = contextlib.nullcontext() if is_user(spec) else root_environment()
    with scoped, node_lock(spec):
        ahead = Ahead(source, host.name, "up", PROBE_TIMEOUT) if source is not None else None
        from gpurig.checks.judge import report
        from gpurig.node.read import read_local
        from gpurig.plans import CHANGE_IDS

        probed = read_local(host, ahead=ahead.take if ahead is not None else None)
        result = report(probed)
        pending = [f.id for f in result.findings if f.id in CHANGE_IDS]
        converged = bool(pending)
        failed = None
        if pending and result.reachable:
            failed = converge_local(spec)
            probed = read_local(host)
            result = report(probed)
    why = reason(result)
    if failed is not None and (why is None or not failed.refused):  # one line, all of it
        said = f"the converge failed: {failed.said}"
        why = said if why is None else f"{why}; {said}"
    if why is not None:
        raise UpError(f"{host.name} cannot serve this job: {why}")
    if converged:  # said once it worked: a failure is the one line above
        say(f"gpurig up: converging {host.name}: {', '.join(dict.fromkeys(pending))}")
    return Ready(exports(socket_of(spec, probed)), result, converged)
