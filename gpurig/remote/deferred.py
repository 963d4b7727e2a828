"""paramiko imports invoke (and invoke imports unittest.mock) when it loads, for one use: an
ssh_config `Match exec` line. pyinfra puts its own runner in invoke's place at once
(pyinfra.connectors.sshuserclient.config), so in a gpurig run invoke is loaded and never used:
about half of paramiko's import, paid before a connecting command's first packet
(benchmarks/README.md, "One far host"). In its place paramiko finds a module that loads the
real one the first time anything reads from it. (importlib's LazyLoader does not do here: an
`import` statement reads `__spec__`, which loads it.)"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

LAZY = ("invoke",)


class OnFirstUse(types.ModuleType):
    """Stands for a module until something reads a name from it, then loads it."""

    def __getattr__(self, name: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), name)


def defer() -> None:
    """Let the modules in LAZY load on first use (called before paramiko is imported)."""
    for name in LAZY:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None:  # not installed: paramiko copes itself
            continue
        stand_in = OnFirstUse(name)
        stand_in.__spec__ = spec
        sys.modules[name] = stand_in
