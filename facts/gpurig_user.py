"""What a user-scope converge reads as the login user (gpurig.spec.user_scope): which tools are on
its PATH, and the user's rootless Podman API: lingering, the `systemd --user` manager and its
podman.socket, gpurig's supervised service, the socket and whether it answers `_ping`."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from gpurig.facts.gpurig_cleanup import CoreFiles, RaySessions
from gpurig.facts.reader import Reader
from gpurig.spec.pattern import lazy
from gpurig.spec.user_scope import LOGIN_FILE_SH, RUNTIME_DIR, SERVICE_SH

# A tool name as it may reach `command -v` (the plans name them; nothing from a host).
_TOOL = lazy(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


class Commands(Reader[dict[str, bool]]):
    """{name: whether `command -v name` finds it} for the login's PATH."""

    @staticmethod
    def default() -> dict[str, bool]:
        return {}

    def command(self, names: Sequence[str]) -> str:
        self._names = list(names)
        bad = [n for n in self._names if not _TOOL.fullmatch(n)]
        if bad:
            raise ValueError(f"not a tool name: {bad[0]!r}")
        return "\n".join(
            f"command -v {shlex.quote(n)} >/dev/null 2>&1 && echo {i} yes || echo {i} no"
            for i, n in enumerate(self._names)
        )

    def process(self, output: list[str]) -> dict[str, bool]:
        found = {}
        for line in output:
            match = re.fullmatch(r"(\d+) (yes|no)", line.strip())
            if match is None or int(match[1]) >= len(self._names):
                raise ValueError(f"unexpected line: {line[:80]!r}")
            found[self._names[int(match[1])]] = match[2] == "yes"
        return found


# Keys UserPodman prints, and what each value must look like (host output is data).
_FIELDS = {
    "uid": r"[0-9]{1,10}",
    "user": r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}",
    "linger": r"yes|no",
    "subuid": r"yes|no",
    "subgid": r"yes|no",
    "runtime_dir": r"/[^\x00-\x1f\x7f]{1,200}",
    "supervised_dir": r"missing|link|[0-9]{1,10}",
    "service": r"[0-9]{1,10}|",
    "socket": r"socket|other|missing",
    "answers": r"yes|no",
    "manager": r"[a-z-]{0,32}",
    "unit_active": r"[a-z-]{0,32}",
    "unit_enabled": r"[a-z-]{0,32}",
}


class UserPodman(Reader[dict[str, Any]]):
    """The login user's rootless Podman API on this node: {"uid", "user", "linger",
    "subuid", "subgid", "runtime_dir", "socket", "answers", "supervised_dir": the owner's
    uid of /tmp/podman-run-UID, "link", or None (missing), "service": the pid of gpurig's
    supervised service or None, "manager", "unit_active", "unit_enabled" (systemd --user,
    read only when lingering)}."""

    shell_executable = "sh"

    @staticmethod
    def default() -> dict[str, Any]:
        return {}

    def command(self) -> str:
        return "\n".join(
            [
                SERVICE_SH,
                'uid=$(id -u); user=$(id -un); echo "uid=$uid"; echo "user=$user"',
                'linger=no; [ -e "/var/lib/systemd/linger/$user" ] && linger=yes',
                'echo "linger=$linger"',
                "for f in subuid subgid; do",
                '  grep -qE "^($user|$uid):" "/etc/$f" 2>/dev/null && echo "$f=yes" '
                '|| echo "$f=no"',
                "done",
                f'run={RUNTIME_DIR}; echo "runtime_dir=$run"; sock="$run/podman/podman.sock"',
                'if [ -L "$sup" ]; then echo supervised_dir=link',
                'elif [ -d "$sup" ]; then echo "supervised_dir=$(stat -c %u "$sup")"',
                "else echo supervised_dir=missing; fi",
                'echo "service=$(service_pid)"',
                'if [ -S "$sock" ]; then echo socket=socket',
                'elif [ -e "$sock" ] || [ -L "$sock" ]; then echo socket=other',
                "else echo socket=missing; fi",
                'answers "$sock" && echo answers=yes || echo answers=no',
                '[ "$linger" = yes ] || exit 0',
                'export XDG_RUNTIME_DIR="/run/user/$uid"',
                'echo "manager=$(systemctl --user is-system-running 2>/dev/null)"',
                'echo "unit_active=$(systemctl --user is-active podman.socket 2>/dev/null)"',
                'echo "unit_enabled=$(systemctl --user is-enabled podman.socket 2>/dev/null)"',
            ]
        )

    def process(self, output: list[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for line in output:
            key, sep, value = line.partition("=")
            pattern = _FIELDS.get(key)
            if not sep or pattern is None or not re.fullmatch(pattern, value):
                raise ValueError(f"unexpected line: {line[:80]!r}")
            found[key] = value
        missing = {"uid", "user", "linger", "runtime_dir", "socket", "answers"} - set(found)
        if missing:
            raise ValueError(f"no {', '.join(sorted(missing))} in the output")
        for key in ("linger", "subuid", "subgid", "answers"):
            found[key] = found.get(key) == "yes"
        found["uid"] = int(found["uid"])
        directory = found.get("supervised_dir", "missing")
        if directory not in ("missing", "link"):
            directory = int(directory)
        found["supervised_dir"] = None if directory == "missing" else directory
        found["service"] = int(found["service"]) if found.get("service") else None
        return found


_MARKER = lazy(r"# (>>>|<<<) gpurig ([a-z_]+)( .*)?")
MAX_LINES = 200  # of gpurig's blocks read back: the rest of the file is the user's own


class LoginProfile(Reader[dict[str, Any]]):
    """The login file of the user's shells and gpurig's blocks in it: {"file": its name in
    the home directory, "exists": bool, "blocks": {name: [lines]}, "damaged": [names of
    blocks without an end]}. Only the blocks are read: the rest of a profile may hold
    anything the user put there (tokens included)."""

    shell_executable = "sh"

    @staticmethod
    def default() -> dict[str, Any]:
        return {"file": ".profile", "exists": False, "blocks": {}, "damaged": []}

    def command(self) -> str:
        return "\n".join(
            [
                LOGIN_FILE_SH,
                'echo "file=$login"',
                '[ -f "$HOME/$login" ] || { echo exists=no; exit 0; }',
                "echo exists=yes",
                "sed -n '/^# >>> gpurig /,/^# <<< gpurig /s/^/|/p' \"$HOME/$login\" "
                f"| head -n {MAX_LINES}",
            ]
        )

    def process(self, output: list[str]) -> dict[str, Any]:
        found = self.default()
        current: str | None = None
        for line in output:
            if line.startswith("file=") and re.fullmatch(
                r"\.(bash_profile|bash_login|profile)", line[5:]
            ):
                found["file"] = line[5:]
            elif line in ("exists=yes", "exists=no"):
                found["exists"] = line == "exists=yes"
            elif line.startswith("|"):
                text = line[1:]
                marker = _MARKER.fullmatch(text)
                if marker and marker[1] == ">>>":
                    if current is not None:  # a block opened inside another: no end
                        found["damaged"].append(current)
                    current = marker[2]
                    found["blocks"][current] = []
                elif marker and current == marker[2]:
                    current = None
                elif current is not None:
                    found["blocks"][current].append(text)
            else:
                raise ValueError(f"unexpected line: {line[:80]!r}")
        if current is not None:
            found["damaged"].append(current)
        return found


# scope: user: leftovers in shared places (/tmp) are the user's own, or none of its business.
class UserRaySessions(RaySessions):
    """RaySessions, of the sessions the user owns."""

    def command(self) -> str:
        return f"GPURIG_MINE=1\n{super().command()}"


class UserCoreFiles(CoreFiles):
    """CoreFiles, of the core files the user owns."""

    def command(self, dirs: Sequence[str]) -> str:
        return f"GPURIG_MINE=1\n{super().command(dirs)}"
