"""What a sandbox left on the machine: empty after a clean `down`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpurig.sandbox import full, net
from gpurig.sandbox.proc import alive
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
            if net.link_exists(rec.veth):
                found.append(f"link {rec.veth}")
    for name, (pid, started) in state.services.items():
        if alive(pid, started):
            found.append(f"{name} process {pid}")
    if net.link_exists(net.BRIDGE):
        found.append(f"bridge {net.BRIDGE}")
    podman_env = {"CONTAINERS_CONF": str(top / "containers.conf"), "PATH": "/usr/bin:/bin"}
    podman = subprocess.run(
        ["podman", "ps", "--all", "--filter", f"label={full.LABEL}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=False,
        env=podman_env,
    )
    found += [f"container {name}" for name in podman.stdout.split()]
    if (top / "containers.conf").exists() and full.network_exists(podman_env):
        found.append(f"podman network {full.NETWORK}")
    prefix = str(top) + "/"
    with open("/proc/self/mounts") as f:
        found += [f"mount {m}" for m in (line.split()[1] for line in f) if m.startswith(prefix)]
    if top.exists():
        found.append(f"directory {top}")
    return found
