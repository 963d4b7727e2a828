"""Small filesystem helpers shared by the CLI, the sandbox and the inventory writer."""

from __future__ import annotations

import contextlib
import os

TYPE_CHECKING = False  # a node contract writes with atomic_write: no pathlib loaded for it
if TYPE_CHECKING:
    from pathlib import Path


def atomic_write(path: str | os.PathLike[str], data: str | bytes, mode: int = 0o644) -> None:
    """Write via a temp file + rename so an interrupted run never leaves half a file."""
    import tempfile  # only where something is written: a node contract's read loads none

    parent, name = os.path.split(os.fspath(path))
    os.makedirs(parent or ".", exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=parent or ".", prefix=f".{name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def xdg_dir(env: str, fallback: str, *parts: str) -> Path:
    """An XDG base directory (cache, state) below which gpurig keeps its own files."""
    from pathlib import Path

    base = os.environ.get(env) or str(Path.home() / fallback)
    return Path(base, "gpurig", *parts)
