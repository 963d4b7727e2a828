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

from gpurig.data import kept

TYPE_CHECKING = False  # a node contract reads a table before its read starts: no typing there
if TYPE_CHECKING:
    from typing import Any

HERE = os.path.dirname(os.path.realpath(__file__))
CACHE = os.path.join(HERE, "__pycache__")
_PARSED: dict[str, Any] = {}


def _parse(text: str) -> Any:
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def table(name: str) -> Any:
    """`gpurig/data/<name>`, parsed once a process; shared between callers, so read it, never
    change it."""
    if name not in _PARSED:
        _PARSED[name] = load(os.path.join(HERE, name), CACHE)
    return _PARSED[name]


def load(source: str | os.PathLike[str], cache_dir: str | os.PathLike[str]) -> Any:
    """The YAML file `source` parsed, through its copy in `cache_dir` where one is kept."""
    st = os.stat(source)
    base = os.path.basename(source)
    name = f"{base}.{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}-{st.st_ctime_ns:x}"
    found = kept.read(cache_dir, name, st.st_uid)
    if found is not None:
        return found
    with open(source, encoding="utf-8") as f:
        parsed = _parse(f.read())
    if os.geteuid() == st.st_uid:
        kept.keep(cache_dir, name, parsed, f"{base}.")
    return parsed
