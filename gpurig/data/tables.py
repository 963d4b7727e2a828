"""The data tables in gpurig/data/ (each cites its sources), parsed once per process.

A module of its own so that users of a table (the compat rules, the sandbox's apt repository)
need not import the drift evaluator and, through it, pyinfra. libyaml's safe loader where
PyYAML has it: the same YAML as `yaml.safe_load`, without the pure-Python parse that cost
`gpurig compat` most of its run (cuda_drivers.yaml).

Each table's parse is kept beside it in __pycache__, in `marshal`'s format (as Python keeps
bytecode there) and named by the YAML's content hash: a node contract then loads neither
PyYAML nor the parse (a seventh of a Prolog's start, issue 28). A copy is trusted as bytecode
is, and only when it is the table's owner's and no one else may write it; where it cannot be
written, the YAML is parsed each time.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import stat
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = HERE / "__pycache__"
SUFFIX = f"marshal{marshal.version}"


def _parse(text: str) -> Any:
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _trusted(path: Path, owner: int, kind: int) -> bool:
    """Whether `path` is a `kind` (stat.S_IFREG, S_IFDIR) of `owner` that no one else may
    write, itself and not through a link."""
    try:
        found = path.lstat()
    except OSError:
        return False
    return (
        stat.S_IFMT(found.st_mode) == kind and found.st_uid == owner and not found.st_mode & 0o022
    )


@cache
def table(name: str) -> Any:
    """`gpurig/data/<name>`, parsed; shared between callers, so read it, never change it."""
    return load(HERE / name, CACHE)


def load(source: Path, cache_dir: Path) -> Any:
    """The YAML file `source` parsed, through its JSON copy in `cache_dir` where one is kept."""
    data = source.read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:32]
    copy = cache_dir / f"{source.name}.{digest}.{SUFFIX}"
    owner = source.stat().st_uid
    if _trusted(cache_dir, owner, stat.S_IFDIR) and _trusted(copy, owner, stat.S_IFREG):
        return marshal.loads(copy.read_bytes())
    parsed = _parse(data.decode("utf-8"))
    with contextlib.suppress(OSError, TypeError, ValueError):
        _keep(copy, parsed, owner)
    return parsed


def _keep(copy: Path, parsed: Any, owner: int) -> None:
    """Write the parse where the next run finds it, as the table's owner only (atomically: a
    run beside this one reads the whole copy or none), and drop the copies of older contents.
    Data marshal cannot hold (a date) is not kept."""
    if os.geteuid() != owner:
        return
    data = marshal.dumps(parsed)
    copy.parent.mkdir(mode=0o755, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=copy.parent, delete=False, suffix=".tmp") as out:
        out.write(data)
    try:
        os.chmod(out.name, 0o644)
        os.replace(out.name, copy)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(out.name)
    stem = copy.name.rsplit(".", 2)[0]
    for old in copy.parent.glob(f"{stem}.*.{SUFFIX}"):
        if old != copy:
            old.unlink(missing_ok=True)
