"""gpurig's blocks in the user's login file (scope: user): one block per concern, between
markers, compared line by line; the rest of the file is the user's and is never read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpurig.plans.change import Change
from gpurig.spec.words import counted


def block(
    change_id: str, name: str, lines: Sequence[str] | None, profile: Mapping[str, Any]
) -> list[Change]:
    """A change when gpurig's block `name` is not `lines` (None: the block must be absent)."""
    where = f"~/{profile['file']}"
    subject = f"{where}: gpurig's {name} block"
    if name in profile["damaged"]:
        return [
            Change(
                change_id,
                subject,
                "a block with its end marker",
                "no end marker: the rest of the file may be the user's",
                f"leave {where} alone: restore or delete the block's lines by hand",
                refused=True,
            )
        ]
    found = profile["blocks"].get(name)
    wanted = None if lines is None else list(lines)
    if found == wanted:
        return []
    data = {"block": name, "lines": wanted}
    if wanted is None:
        return [
            Change(change_id, subject, "absent", "present", f"remove it from {where}", data=data)
        ]
    if found is None:
        actual = "missing"
    else:
        lost = [line for line in wanted if line not in found]
        extra = [line for line in found if line not in wanted]
        parts = [f"{len(lost)} missing"] * bool(lost) + [f"{len(extra)} not gpurig's"] * bool(extra)
        actual = f"lines: {', '.join(parts)}" if parts else "its lines in another order"
    return [
        Change(
            change_id,
            subject,
            f"gpurig's {counted(len(wanted), 'line')}",
            actual,
            f"write it in {where}",
            data=data,
        )
    ]
