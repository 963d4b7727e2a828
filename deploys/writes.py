"""Commands that write a file atomically, so that an interrupted converge or a full disk leaves
the old file or the new one, never half of either, and no temporary file beside it.

The data is uploaded into a fresh private directory (mode 0700, owned by the login, at a random
/tmp name: not pyinfra's predictable /tmp/pyinfra-<sha1>), never next to the file. Then one
host command copies it next to the file under a name of its own, created with the final mode
before any content arrives, and renames it over the file. That command runs to its end on the
host even when the controller dies (Ctrl-C, SIGTERM, a lost network): sshd gives a command
without a terminal no hangup. If the copy fails (ENOSPC), it removes its copy and says which
filesystem is full; the old file is untouched. A container's env file is staged the same way
(`stage`), read there by `ENGINE run` and removed with the stage (deploys/containers.py).
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Iterator, Sequence
from io import BytesIO
from pathlib import PurePosixPath
from typing import Any

from pyinfra import logger
from pyinfra.api import FileUploadCommand, StringCommand

from gpurig.facts.safe_path import AS_ACCOUNT, SAFE_PATH
from gpurig.spec.user_scope import BEGIN, END, LOGIN_FILE_SH, shell_path

STAGE_DIR = "/tmp"


def _free(path: str) -> str:
    """Shell words that print `FILESYSTEM (mounted at MOUNT) has N KiB free` for `path`'s
    filesystem (POSIX `df -P`: one line per filesystem, six fields)."""
    q = shlex.quote(path)
    return (
        f'set -- $(df -P -k -- {q} 2>/dev/null | sed -n 2p); [ $# -ge 6 ] && echo "$1 (mounted '
        'at $6) has $4 KiB free"'
    )


class StagedUpload(FileUploadCommand):
    """The upload into the stage, as the login itself (the stage is the login's; sudo would
    only add pyinfra's own /tmp copy). When it fails (the stage's filesystem full: SFTP says
    only "Failure"), the stage is removed and the message names that filesystem."""

    def __init__(self, data: bytes, stage: str) -> None:
        super().__init__(BytesIO(data), f"{stage}/upload", _sudo=False)
        self.stage = stage

    def execute(self, state: Any, host: Any, connector_arguments: Any) -> bool:
        try:
            if super().execute(state, host, connector_arguments):
                return True
            why = "failed"
        except OSError as exc:
            why = f"failed ({exc or type(exc).__name__})"
        cleanup = StringCommand(f"rm -rf {shlex.quote(self.stage)}; {_free(STAGE_DIR)}")
        try:
            _, output = cleanup.execute(state, host, {**connector_arguments, "_sudo": False})
            free = f"; {output.stdout.strip()}" if output.stdout.strip() else ""
        except OSError:  # the connection is gone too: pyinfra_guard reports it
            free = ""
        host.log_styled(
            f"gpurig: the upload into {self.stage} {why}{free}; nothing was written in place",
            fg="red",
            log_func=logger.error,
        )
        return False


def stage(data: bytes) -> tuple[str, list[object]]:
    """A fresh private stage holding `data` as `upload`: its path, and the two steps that make
    it (the directory, mode 0700, and an empty `upload`, mode 0600; then the upload). Both run
    as the login itself, without sudo, so the stage is the account that uploads into it: the
    SSH login's, or root's when root converges its own machine. No variable of the caller's
    environment (sudo's SUDO_UID) names its owner. The caller's next command must remove the
    stage, whatever else it does."""
    path = f"{STAGE_DIR}/gpurig-{secrets.token_hex(16)}"
    q = shlex.quote(path)
    make = StringCommand(
        # A stage an interrupted upload left (the lock lets one converge write at a time).
        f"find {STAGE_DIR} -maxdepth 1 -type d -name 'gpurig-{'?' * 32}' -user \"$(id -u)\" "
        f"-mmin +10 -exec rm -rf {{}} + 2>/dev/null; "
        f"mkdir -m 700 {q} && (umask 077 && : > {q}/upload)",
        _sudo=False,
    )
    return path, [make, StagedUpload(data, path)]


# The placing steps run as the account that can change the directory: its own mkdir, install,
# cat (from root's pipe: the stage stays root's), chgrp and rename, on the declared path, which
# that account resolves with its own permissions. Arguments: PARENT MODE TMP DEST GROUP.
_AS_OWNER = (
    'mkdir -p -- "$1" && install -m "$2" /dev/null "$3" && cat > "$3" && '
    '{ [ -z "$5" ] || chgrp -- "$5" "$3"; } && mv -f -- "$3" "$4" || '
    '{ rc=$?; rm -f -- "$3"; exit "$rc"; }'
)


def put(data: bytes, dest: str, mode: str, owner: str | None = None) -> Iterator[object]:
    """Write `data` to `dest` with `mode` (and `owner`) atomically: stage, upload, place. As
    root, the directory is walked (facts/safe_path.sh): where root alone can change it, root
    places the file in the walked directory; where one other account can, that account places
    it (facts/as_account.sh: that account alone), and only if it is the declared owner;
    otherwise nobody does. Root never writes in another account's directory, nor follows a
    link that account could re-point."""
    path, steps = stage(data)
    yield from steps
    q_stage = shlex.quote(path)
    parent, name = str(PurePosixPath(dest).parent), PurePosixPath(dest).name
    q_parent, q_name = shlex.quote(parent), shlex.quote(name)
    # A name of its own, unrelated to the stage's (which anyone can list in /tmp).
    q_tmp = shlex.quote(f"{name}.gpurig-{secrets.token_hex(8)}")
    user, _, group = (owner or "").partition(":")
    chown = f'chown -h {shlex.quote(owner)} "$t" && ' if owner else ""
    failed = shlex.quote(f"gpurig: could not write {dest}, the old file is unchanged:")
    # Another account places the file only as its declared owner: with none declared, the
    # file is root's, and root never writes in that account's directory.
    owner_check = (
        f'elif [ -n "$AS" ] && [ "$(id -u -- {shlex.quote(user)} 2>/dev/null)" != "$AS" ]; '
        f'then REFUSED="uid $AS can change "{q_parent}", not the declared owner {user}"; rc=1\n'
        if owner
        else f'elif [ -n "$AS" ]; then REFUSED="uid $AS can change "{q_parent}", and no owner is '
        "declared: the file would be root's\"; rc=1\n"
    )
    yield StringCommand(
        f"{SAFE_PATH}\n{AS_ACCOUNT}\nAS='' REFUSED='' CHECKED={q_parent} rc=0\n"
        f'if [ "$(id -u)" = 0 ]; then walk {q_parent}; AS=$OWNER; fi\n'
        'if [ -n "$REFUSED" ]; then rc=1\n'
        f"{owner_check}"
        'elif [ -n "$AS" ] && ! command -v setpriv >/dev/null 2>&1; then '
        'REFUSED="no setpriv to write as uid $AS, who can change it"; rc=1\n'
        'elif [ -n "$AS" ]; then '
        f'cat {q_stage}/upload | as_account "$AS" "$(id -g -- "$AS")" --init-groups '
        f"/bin/sh -c {shlex.quote(_AS_OWNER)} sh {q_parent} {mode} "
        f"{q_parent}/{q_tmp} {q_parent}/{q_name} {shlex.quote(group)}; rc=$?\n"
        f'else t="$CHECKED"/{q_tmp}; mkdir -p -- "$CHECKED" && install -m {mode} /dev/null "$t" '
        f'&& cat {q_stage}/upload > "$t" && {chown}mv -f -- "$t" "$CHECKED"/{q_name}; rc=$?\n'
        '[ $rc -eq 0 ] || rm -f -- "$t"\nfi\n'
        f"rm -rf {q_stage}\n"
        f'if [ $rc -ne 0 ]; then echo {failed} "${{REFUSED:-$({_free(parent)})}}" >&2; '
        "exit $rc; fi"
    )


def remove(path: str) -> str:
    return f"rm -f {shell_path(path)}"


def put_home(content: str, path: str, mode: str) -> str:
    """Write a user's own `~/...` file, not a secret (scope: user: no upload is staged, and
    the path is the login's home), atomically: a temporary file beside it, then a rename."""
    return (
        f'f={shell_path(path)} && mkdir -p "$(dirname "$f")" && '
        'tmp=$(mktemp "$f.gpurig-XXXXXX") && '
        f'printf %s {shlex.quote(content)} > "$tmp" && chmod {mode} "$tmp" && mv -f "$tmp" "$f"'
    )


# Drops gpurig's block `name` from a login file; an unterminated one is kept whole (the plan
# refuses those: the lines after it may be the user's).
_DROP_BLOCK = """\
!skip && index($0, begin) == 1 { skip = 1; held = $0 "\\n"; next }
skip { held = held $0 "\\n"; if ($0 == end) { skip = 0; held = "" }; next }
{ print }
END { if (skip) printf "%s", held }
"""


def write_block(name: str, lines: Sequence[str] | None) -> str:
    """Put gpurig's block `name` at the end of the user's login file, in place of the old one
    (None: remove it): the user's lines kept as they are, the file written whole and renamed
    over the old one, through a link when it is one (a dotfile manager's)."""
    begin, end = BEGIN.format(name=name), END.format(name=name)
    block = "".join(f"{line}\n" for line in (begin, *lines, end)) if lines is not None else ""
    prefix = begin.split(" (")[0] + " "
    return "\n".join(
        [
            "set -e",
            LOGIN_FILE_SH,
            'f="$HOME/$login"; [ -e "$f" ] || : > "$f"',
            'real=$(readlink -f "$f"); tmp=$(mktemp "$real.gpurig-XXXXXX")',
            f"awk -v begin={shlex.quote(prefix)} -v end={shlex.quote(end)} "
            f'{shlex.quote(_DROP_BLOCK)} "$real" > "$tmp"',
            f'printf %s {shlex.quote(block)} >> "$tmp"',
            'chmod --reference="$real" "$tmp"; mv -f "$tmp" "$real"',
        ]
    )
