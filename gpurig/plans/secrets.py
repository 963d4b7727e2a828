"""Secrets (`secrets`): files copied from the machine running gpurig, mode 0600 unless
declared. The host's copy is compared by a salted sha256 (the salt is new every run), so no
output carries a digest anyone could look up; the content never leaves this machine but as an
upload (deploys/secrets.py)."""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from facts.gpurig_files import FileDigests
from gpurig.change import Change

SALT = secrets.token_hex(16)


def local_path(src: str) -> Path:
    """Where a secret's `src` is on this machine (~ expanded)."""
    return Path(os.path.expanduser(src))


def local_digest(src: str, salt: str = SALT) -> str | None:
    """The salted sha256 of the local source, or None when it cannot be read."""
    try:
        return hashlib.sha256(salt.encode() + local_path(src).read_bytes()).hexdigest()
    except OSError:
        return None


def plan(spec: Mapping[str, Any], read: Callable[..., Any]) -> list[Change]:
    declared = spec["secrets"]
    if not declared:
        return []
    found = read(FileDigests, paths=sorted({s["dest"] for s in declared}), salt=SALT)
    # Every source is checked first: a typo changes nothing on the host.
    unreadable = [s["src"] for s in declared if local_digest(s["src"]) is None]
    if unreadable:
        return [
            Change(
                "secret.source",
                ", ".join(unreadable),
                "a readable file on this machine",
                "missing or unreadable",
                "copy no secret until every source exists",
                refused=True,
            )
        ]
    changes = []
    for item in declared:
        dest, mode, owner = item["dest"], item["mode"], item.get("owner")
        seen = found.get(dest)
        data = {"src": item["src"], "dest": dest, "mode": mode, "owner": owner}
        if seen is None or seen["sha256"] != local_digest(item["src"]):
            change_id = "secret.missing" if seen is None else "secret.content"
            actual = "missing" if seen is None else "different content"
            changes.append(
                Change(
                    change_id,
                    dest,
                    f"the content of {item['src']}",
                    actual,
                    f"upload {item['src']} to {dest}",
                    data=data,
                )
            )
            continue
        if int(seen["mode"], 8) != int(mode, 8):
            change = Change("secret.mode", dest, mode, seen["mode"], f"chmod {mode} {dest}",
                            field="mode", data=data)  # fmt: skip
            changes.append(change)
        if owner and seen["owner"] != owner.split(":")[0]:
            change = Change("secret.owner", dest, owner, seen["owner"], f"chown {owner} {dest}",
                            field="owner", data=data)  # fmt: skip
            changes.append(change)
    return changes
