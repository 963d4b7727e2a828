"""Commands that write a file atomically: created with its final mode before any content
arrives, filled by an upload, then renamed over the old one, so an interrupted converge
leaves the old file or the new one, never half of either."""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Iterator, Sequence
from io import BytesIO
from pathlib import PurePosixPath

from pyinfra.api import FileUploadCommand, StringCommand

from gpurig.user_scope import BEGIN, END, LOGIN_FILE_SH, shell_path


def put(data: bytes, dest: str, mode: str, owner: str | None = None) -> Iterator[object]:
    """Upload `data` to `dest`. A login that uses sudo stages the upload in a fresh private
    directory (mode 0700, owned by the login), not at a predictable /tmp name."""
    q_dest = shlex.quote(dest)
    tmp = shlex.quote(f"{dest}.gpurig-tmp")
    stage = f"/tmp/gpurig-{secrets.token_hex(16)}"
    parent = shlex.quote(str(PurePosixPath(dest).parent))
    yield StringCommand(
        f"mkdir -p {parent} && rm -f {tmp} && install -m {mode} /dev/null {tmp} && "
        f'mkdir -m 700 {stage} && chown "${{SUDO_UID:-$(id -u)}}" {stage}'
    )
    yield FileUploadCommand(
        BytesIO(data), f"{dest}.gpurig-tmp", remote_temp_filename=f"{stage}/upload"
    )
    chown = f"chown {shlex.quote(owner)} {tmp} && " if owner else ""
    yield StringCommand(f"rm -rf {stage}; {chown}mv -f {tmp} {q_dest}")


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
