"""The data tables in gpurig/data/ (each cites its sources), parsed once per process.

A module of its own so that users of a table (the compat rules, the sandbox's apt repository)
need not import the drift evaluator and, through it, pyinfra. libyaml's safe loader where
PyYAML has it: the same YAML as `yaml.safe_load`, without the pure-Python parse that cost
`gpurig compat` most of its run (cuda_drivers.yaml).

Each table's parse is kept beside it in __pycache__ (gpurig.data.kept), named by the YAML
file's identity (inode, size, modification and change times, as Python keys its bytecode by
the source's time and size; no hash module to load): a node contract then loads neither PyYAML
nor the parse (a seventh of a Prolog's start, benchmarks/node_contracts.py). Only the table's
owner writes or trusts a copy; where none can be kept, the YAML is parsed each time.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any

from gpurig.data import kept

HERE = Path(__file__).resolve().parent
CACHE = HERE / "__pycache__"


def _parse(text: str) -> Any:
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@cache
def table(name: str) -> Any:
    """`gpurig/data/<name>`, parsed; shared between callers, so read it, never change it."""
    return load(HERE / name, CACHE)


def load(source: Path, cache_dir: Path) -> Any:
    """The YAML file `source` parsed, through its copy in `cache_dir` where one is kept."""
    st = source.stat()
    name = f"{source.name}.{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}-{st.st_ctime_ns:x}"
    found = kept.read(cache_dir, name, st.st_uid)
    if found is not None:
        return found
    parsed = _parse(source.read_text(encoding="utf-8"))
    if os.geteuid() == st.st_uid:
        kept.keep(cache_dir, name, parsed, f"{source.name}.*")
    return parsed
