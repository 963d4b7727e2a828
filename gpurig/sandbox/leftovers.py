"""What a sandbox left on the machine: empty after a clean `down`. Per sandbox: only what
its records name (and containers carrying its name's label), never another sandbox's."""

from __future__ import annotations

from pathlib import Path

from gpurig.sandbox import full, net
from gpurig.sandbox.proc import alive, run
from gpurig.sandbox.state import State


def leftovers(top: Path, state: State) -> list[str]:
    """Everything of `state` still present: processes, namespaces, links, containers, mounts."""
    found = []
    for rec in state.hosts.values():
        if rec.kind == "fleet":
            if alive(rec.pid, rec.started):
                found.append(f"process {rec.pid} ({rec.name})")
            if net.netns_exists(rec.netns):
                found.append(f"netns {rec.netns}")
            if rec.veth and net.link_exists(rec.veth):
                found.append(f"link {rec.veth}")
    for name, (pid, started) in state.services.items():
        if alive(pid, started):
            found.append(f"{name} process {pid}")
    found += [f"link {link}" for link in (state.bridge, state.podman_interface)
              if link and net.link_exists(link)]  # fmt: skip
    podman_env = {"CONTAINERS_CONF": str(top / "containers.conf"), "PATH": "/usr/bin:/bin"}
    podman = run(
        ["podman", "ps", "--all", "--filter", f"label={full.SANDBOX_LABEL}={state.name}",
         "--format", "{{.Names}}"],
        check=False, env=podman_env,
    )  # fmt: skip
    found += [f"container {name}" for name in podman.stdout.split()]
    if (top / "containers.conf").exists() and full.network_exists(state.podman_network, podman_env):
        found.append(f"podman network {state.podman_network}")
    prefix = str(top) + "/"
    with open("/proc/self/mounts") as f:
        found += [f"mount {m}" for m in (line.split()[1] for line in f) if m.startswith(prefix)]
    if top.exists():
        found.append(f"directory {top}")
    return found
