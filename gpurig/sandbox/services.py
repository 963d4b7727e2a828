"""Servers the sandbox runs on its bridge for its hosts. Each module has ADDRESS and
`start(directory) -> (pid, start time)`; the sandbox records, checks and stops them alike."""

from __future__ import annotations

from types import ModuleType

from gpurig.sandbox import aptrepo, gitserver, registry

SERVICES: dict[str, ModuleType] = {"registry": registry, "aptrepo": aptrepo, "git": gitserver}
