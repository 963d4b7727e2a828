"""Files gpurig writes whole: present with its content and mode, or absent."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpurig.facts.gpurig_files import FileDigests
from gpurig.plans.change import Change
from gpurig.spec.digest import sha256_hex


def managed(
    change_id: str, wanted: Mapping[str, str | None], read: Callable[..., Any], mode: str = "644"
) -> list[Change]:
    """A change for each path whose content or mode is not `wanted` (None: must be absent)."""
    if not wanted:
        return []
    found = read(FileDigests, paths=sorted(wanted))
    changes = []
    for path, content in wanted.items():
        seen = found.get(path)
        if content is None:
            if seen is not None:
                changes.append(
                    Change(
                        change_id,
                        path,
                        "absent",
                        "present",
                        f"remove {path}",
                        data={"path": path, "content": None},
                    )
                )
            continue
        digest = sha256_hex(content.encode())
        if seen is None:
            actual = "missing"
        elif seen["sha256"] != digest:
            actual = "different content"
        elif int(seen["mode"], 8) != int(mode, 8):
            actual = f"mode {seen['mode']}"
        else:
            continue
        changes.append(
            Change(
                change_id,
                path,
                f"gpurig's content, mode {mode}",
                actual,
                f"write {path}",
                data={"path": path, "content": content, "mode": mode},
            )
        )
    return changes
