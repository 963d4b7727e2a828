"""Servers the sandbox runs on its bridge for its hosts. Each module has
`url(host, port) -> str` and `start(directory, host, port) -> (pid, start time)`; the sandbox
records, checks and stops them alike, at the address and port its allocation gives them."""

from __future__ import annotations

from types import ModuleType

from gpurig.sandbox import aptrepo, gitserver, registry
from gpurig.sandbox.state import State

SERVICES: dict[str, ModuleType] = {"registry": registry, "aptrepo": aptrepo, "git": gitserver}


def url(state: State, service: str) -> str:
    """How the sandbox's hosts reach `service`: registry `host:port`, aptrepo `http://...`,
    git `git://...`. Tests and the demo read every address from here, none is fixed."""
    return SERVICES[service].url(*state.endpoint(service))
