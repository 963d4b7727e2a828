"""Pre-launch cleanup (`cleanup`): removes only what the facts found inside the declared
places, re-checking each path right before it goes, and says what it freed."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from pyinfra.api import deploy, operation

from gpurig.deploys.changes import apply
from gpurig.deploys.snapshot import read
from gpurig.facts.gpurig_cleanup import RAY_PROCESSES
from gpurig.facts.safe_path import AS_ACCOUNT, SAFE_PATH
from gpurig.plans import cleanup as plan
from gpurig.plans.change import Change
from gpurig.spec.words import counted

# Removes $2 if it is still what was found, checked by whoever removes it right before:
# $1 `d` a directory, `f` a regular file, `c` a regular file that is a core file (its ELF
# magic, read without following a link or waiting on a FIFO, within 5 s), never a link.
_GONE = r"""
case $1 in
  d) [ -d "$2" ] && [ ! -L "$2" ] && exec rm -rf -- "$2" ;;
  f | c) [ -f "$2" ] && [ ! -L "$2" ] || exit 0
    if [ "$1" = c ]; then
      m=$(timeout 5 dd if="$2" bs=4 count=1 iflag=nonblock,nofollow 2>/dev/null | od -An -tx1)
      [ "$(printf %s "$m" | tr -d ' \n')" = 7f454c46 ] || exit 0
    fi
    exec rm -f -- "$2" ;;
esac
exit 0
"""
# gone KIND PATH: as root, PATH walked (facts/safe_path.sh): where root alone can change it and
# every directory above it, removed by root by its walked name (a sticky directory's entry of
# root's too, as /tmp's); where one other account can (its directory, or its entry), removed
# by that account on the declared path (its permissions resolve its links); elsewhere left
# alone, saying why. A link is never removed, nor followed (_GONE checks the name itself).
_GONE_AS = r"""
gone() {
  as='' p=$2
  if [ "$(id -u)" = 0 ]; then
    walk "$2" || { printf 'gpurig: left %s alone: %s\n' "$2" "$REFUSED" >&2; return 0; }
    as=$OWNER
    [ -n "$as" ] || p=$HELD
  fi
  if [ -z "$as" ]; then /bin/sh -c "$GONE" sh "$1" "$p"; return; fi
  as_account "$as" "$(id -g -- "$as" 2>/dev/null || echo "$as")" --clear-groups \
    /bin/sh -c "$GONE" sh "$1" "$p"
}
"""


def _remove(paths: Sequence[str], freed: str, kind: str = "f") -> str:
    """Remove each path only if it is still what was found, by the account whose place it is
    (gone), and say what was freed."""
    each = "\n".join(f"gone {kind} {shlex.quote(p)}" for p in paths)
    return (
        f"{SAFE_PATH}\n{AS_ACCOUNT}\nGONE={shlex.quote(_GONE)}\n{_GONE_AS}\n{each}\n"
        f"echo {shlex.quote(f'gpurig: freed {freed}')}"
    )


def commands(change: Change) -> str:
    data = change.data
    if change.id == "cleanup.ray_sessions":
        stale = data["stale"]
        freed = f"{counted(len(stale), 'stale Ray session')}, {sum(stale.values())} KiB"
        return (
            f"if pgrep -f {shlex.quote(RAY_PROCESSES)} >/dev/null; "
            "then echo 'gpurig: Ray started meanwhile; /tmp/ray left alone'; "
            f"else {_remove(sorted(stale), freed, 'd')}; fi"
        )
    if change.id == "cleanup.core_files":
        files = data["files"]
        freed = f"{counted(len(files), 'core file')}, {counted(sum(files.values()), 'byte')}"
        return _remove(sorted(files), freed, "c")
    if change.id == "cleanup.editable_finders":
        finders = data["finders"]
        paths = sorted({p for finder, pths in finders.items() for p in (finder, *pths)})
        return _remove(
            paths, f"{counted(len(finders), 'stale editable finder')}: {', '.join(sorted(finders))}"
        )
    cache = data["cache"]
    return _remove([cache["path"]], f"{plan.FLASHINFER_CACHE}, {cache['kib']} KiB", "d")


@operation()
def leftovers(spec: dict[str, Any]):
    """Remove the leftovers the spec's cleanup names."""
    yield from apply(plan.plan(spec, read), "no leftovers to remove",
                     lambda change: [commands(change)])  # fmt: skip


@deploy("Pre-launch cleanup")
def cleanup(spec: dict[str, Any]) -> None:
    if any(spec["cleanup"].values()):
        leftovers(name="Remove leftovers", spec=spec)
