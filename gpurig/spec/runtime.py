"""Where what a node contract works out from its spec is kept between runs (gpurig.data.kept):
the running account's runtime directory, cleared at boot (root: /run/gpurig; others:
$XDG_RUNTIME_DIR/gpurig), or GPURIG_RUNTIME_DIR (for root, only where root alone can change
it). A contract at every job start then loads no YAML parser for a spec that has not changed
(the spec's parse), and starts its read before its checks are loaded (gpurig.node.ahead). A
copy is trusted only as the account's own, and holds what it was worked out from: it is used
only where that is the same, byte for byte (a checksum in its name only places it: no digest
module is loaded for it, which cost a contract more than reading the copy does)."""

from __future__ import annotations

import binascii
import os
import stat

from gpurig import __version__
from gpurig.data import kept as kept_copy

TYPE_CHECKING = False  # typing is not loaded before a contract's read starts
if TYPE_CHECKING:
    from typing import Any


def directory() -> str | None:
    """As root, GPURIG_RUNTIME_DIR counts only where root alone can change it and every
    directory on its way (gpurig.safe_path), and as the path that was walked: what root keeps
    there is run (the read started ahead) and trusted at the next job start; elsewhere
    nothing is kept. Another account's: $XDG_RUNTIME_DIR/gpurig where that directory exists;
    else (a SLURM job carries the login node's XDG_RUNTIME_DIR to a node that has none) in
    Podman's runtime directory for such an account, /tmp/podman-run-UID, as user scope's own
    converge uses it (gpurig.spec.user_scope); a copy is then read only where its directory is
    the account's own, in a directory of its own (gpurig.data.kept)."""
    explicit = os.environ.get("GPURIG_RUNTIME_DIR")
    uid = os.geteuid()
    if explicit and uid == 0:
        from gpurig.safe_path import walk

        walked = walk(explicit)
        return walked.checked if walked.root_only else None
    if explicit:
        return explicit
    if uid == 0:
        return "/run/gpurig"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    parent = runtime if runtime and os.path.isdir(runtime) else f"/tmp/podman-run-{uid}"
    return os.path.join(parent, "gpurig") if kept_copy.trusted(parent, uid, stat.S_IFDIR) else None


# A copy's name (its kind and a checksum of its key) and its key: all that it was worked out
# from, and this gpurig's version (what one version worked out is that version's).
if TYPE_CHECKING:
    Name = tuple[str, bytes]


def named(kind: str, *parts: str | bytes) -> Name:
    """The name and key of the copy of `kind` worked out from `parts`."""
    key = b"\0".join(
        [__version__.encode(), *(p.encode() if isinstance(p, str) else p for p in parts)]
    )
    return f"{kind}.{binascii.crc32(key):08x}{len(key):x}", key


def kept(name: Name) -> Any | None:
    """What was kept as `name` on an earlier run, or None (also where the copy of that name
    was worked out from something else)."""
    where = directory()
    found = None if where is None else kept_copy.read(where, name[0], os.geteuid())
    if isinstance(found, tuple) and len(found) == 2 and found[0] == name[1]:
        return found[1]
    return None


# Copies of each kind a directory keeps: a node's contracts share one spec file, but an
# account may run several (root's contracts and a test of a new spec beside them).
KEPT_COPIES = 8


def keep(name: Name, value: Any, stale: str) -> None:
    """Keep `value` as `name` for the next run, with the last few others whose names start
    with `stale`."""
    where = directory()
    if where is not None:
        copy = (name[1], value)
        kept_copy.keep(where, name[0], copy, stale, mode=0o700, others=KEPT_COPIES - 1)


def kept_parse(text: str) -> Any | None:
    """The data `text` parsed to on an earlier run, or None."""
    return kept(named("spec", text))


def keep_parse(text: str, data: Any) -> None:
    """Keep the data `text` parses to for the next run."""
    keep(named("spec", text), data, "spec.")
