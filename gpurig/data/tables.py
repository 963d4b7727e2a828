"""The data tables in gpurig/data/ (each cites its sources), parsed once per process.

A module of its own so that users of a table (the compat rules, the sandbox's apt repository)
need not import the drift evaluator and, through it, pyinfra. libyaml's safe loader where
PyYAML has it: the same YAML as `yaml.safe_load`, without the pure-Python parse that cost
`gpurig compat` most of its run (cuda_drivers.yaml).
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def table(name: str) -> Any:
    """`gpurig/data/<name>`, parsed; shared between callers, so read it, never change it."""
    text = (resources.files("gpurig") / "data" / name).read_text(encoding="utf-8")
    return yaml.load(text, Loader=_LOADER)
