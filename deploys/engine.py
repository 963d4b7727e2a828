"""The container engine (`engine`): packages, the service or socket, Docker's daemon.json keys
(every other key kept; one write and one restart for all of them), Podman's registries and
DOCKER_HOST files."""

from __future__ import annotations

import json
import shlex
from typing import Any

from pyinfra.api import deploy, operation

from gpurig.deploys.changes import start
from gpurig.deploys.core_dumps import write
from gpurig.deploys.packages import install
from gpurig.deploys.snapshot import read
from gpurig.deploys.writes import put
from gpurig.plans import engine as plan
from gpurig.plans.engine import DAEMON_JSON
from gpurig.spec.user_scope import PID_FILE, SERVICE_SH, is_user

DAEMON_KEYS = ("engine.insecure_registries", "toolkit.runtime", "engine.daemon_json")


def start_unit(unit: str, restart: bool = False) -> str:
    """Start (or restart) a unit; `reset-failed` first, so a unit that hit systemd's start
    limit after earlier restarts is started again instead of refused."""
    u = shlex.quote(unit)
    verb = "restart" if restart else "start"
    return f"systemctl reset-failed {u} 2>/dev/null; systemctl enable {u} && systemctl {verb} {u}"


def write_daemon_json(changes: list) -> list:
    """One write and one docker restart for every daemon.json key that changed; a restart
    stops every container without a restart policy, so it happens only on a real change."""
    daemon = [c for c in changes if c.id in DAEMON_KEYS]
    if not daemon:
        return []
    content = json.dumps(daemon[0].data["daemon_json"], indent=2, sort_keys=True) + "\n"
    return [*put(content.encode(), DAEMON_JSON, "644"), start_unit("docker", restart=True)]


@operation()
def container_engine(spec: dict[str, Any]):
    """Install and start the declared engine, with gpurig's files."""
    changes = [c for c in plan.plan(spec, read) if c.id not in DAEMON_KEYS]
    if not start(changes, f"{spec['engine']} installed, configured and running"):
        return
    for change in changes:
        if change.id == "packages.missing":
            yield install(change)
        elif change.id in ("engine.service", "engine.socket"):
            yield start_unit(change.data["unit"])
        elif change.id in ("engine.registries", "engine.docker_host"):
            yield from write(change)


@operation()
def docker_daemon_json(spec: dict[str, Any]):
    """gpurig's keys in daemon.json (every other key kept), one write and one restart."""
    changes = [c for c in plan.plan(spec, read) if c.id in DAEMON_KEYS or c.refused]
    if start(changes, f"{DAEMON_JSON} has gpurig's keys"):
        yield from write_daemon_json(changes)


# gpurig's supervised service stopped (when it runs), then the user's socket started and
# waited for; all under the converge's lock, so two runs never start two services.
_STOP = f"""\
{SERVICE_SH}
p=$(service_pid)
if [ -n "$p" ]; then
  kill "$p"; i=0
  while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.2; i=$((i+1)); done
  kill -9 "$p" 2>/dev/null || true
  rm -f "$sup/{PID_FILE}"
fi
"""
_WAIT = """\
i=0
until answers "$sock"; do
  i=$((i+1))
  if [ $i -gt 60 ]; then
    why=; [ -n "${log-}" ] && why=": $(tail -n 3 "$log" | tr '\\n' ' ')"
    echo "gpurig: the user's Podman API at $sock does not answer after 30 s$why" >&2
    exit 1
  fi
  sleep 0.5
done
"""
USER_START = {
    # Podman's own runtime directory for a user without one: made here if missing, never
    # used when another account made it (or a link) first; a stale socket is replaced.
    "supervised": f"""\
{_STOP}
if [ -L "$sup" ] || ! mkdir -p -m 700 "$sup" || [ ! -O "$sup" ]; then
  echo "gpurig: $sup is not this user's directory; left alone" >&2; exit 1
fi
mkdir -p -m 700 "$sup/podman" && rm -f "$sup_sock"
log="$sup/gpurig-podman.log"
XDG_RUNTIME_DIR="$sup" setsid podman $service_args </dev/null >"$log" 2>&1 &
echo $! > "$sup/{PID_FILE}"
sock=$sup_sock
{_WAIT}""",
    "systemd": f"""\
{_STOP}
export XDG_RUNTIME_DIR="/run/user/$(id -u)"
sock="$XDG_RUNTIME_DIR/podman/podman.sock"
systemctl --user reset-failed podman.socket podman.service 2>/dev/null
systemctl --user enable podman.socket 2>/dev/null
systemctl --user stop podman.service && systemctl --user restart podman.socket
{_WAIT}""",
    "stop": _STOP,
}


@operation()
def user_podman(spec: dict[str, Any]):
    """The user's rootless Podman (scope: user): its registries, its API socket
    (podman.socket in the user's systemd manager where the user is lingering, else gpurig's
    supervised service), and DOCKER_HOST in the user's login file."""
    changes = plan.plan(spec, read)
    if start(changes, "the user's Podman answers; DOCKER_HOST as declared"):
        for change in changes:
            if "start" in change.data:
                yield USER_START[change.data["start"]]
            else:
                yield from write(change)


@deploy("Container engine")
def engine(spec: dict[str, Any]) -> None:
    if is_user(spec):
        user_podman(name="The user's Podman, its socket and DOCKER_HOST", spec=spec)
        return
    if spec["engine"] != "none":
        container_engine(name=f"Install and start {spec['engine']}", spec=spec)
    if spec["engine"] == "docker":
        docker_daemon_json(name=f"Configure {DAEMON_JSON}", spec=spec)
