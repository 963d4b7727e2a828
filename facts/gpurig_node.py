"""The node as the checks and onboarding see it, beyond what the converge manages: OS and
login, memory, cgroup limits and leaks, disk headroom, the login shell's core limit,
the engines' versions and API socket. One small fact per piece of state, each batched into
the host's one round trip (round_trip) like every other; each needs only sh, and reports a
missing tool as absence."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from gpurig.facts.round_trip import BOUNDED, EUID, LINES, Sectioned, part_text, section
from gpurig.facts.safe_path import SAFE_PATH
from gpurig.read import node_parse
from gpurig.spec.pattern import lazy
from gpurig.spec.textsafe import first_unsafe

# `df -P`'s line for one file system: name (may hold blanks), four numbers, capacity, mount.
_DF_LINE = lazy(r"(?P<fs>.+?)\s+(?P<total>\d+)\s+(?P<used>\d+)\s+(?P<avail>\d+)\s+"
                      r"(?P<capacity>\d+%|-)\s+(?P<mount>/.*)")  # fmt: skip


def df_line(text: str | None) -> dict[str, Any] | None:
    """The last line of `df -P` (1K blocks or inodes) typed, or None when df printed nothing."""
    if not text or not text.strip():
        return None
    match = _DF_LINE.fullmatch(text.strip().splitlines()[-1])
    if match is None:
        raise ValueError(f"not a df -P line: {text.strip()[-120:]!r}")
    return {"total": int(match["total"]), "free": int(match["avail"]), "mount": match["mount"]}


def _df_rows(parts: Mapping[str, str], kind: str, exists: list[bool]) -> list[str | None]:
    """Each path's `df -P` line of `kind`: from the one df of all the paths that exist (a line
    each, in their order, after its header), else from the path's own df."""
    lines = (parts.get(kind) or "").splitlines()[1:]
    if kind in parts and len(lines) == sum(exists):
        given = iter(lines)
        return [next(given) if there else None for there in exists]
    return [parts.get(f"{kind}{index}") for index in range(len(exists))]


class Login(Sectioned[dict[str, Any]]):
    """Who this login is, and whether it can become root without a password (`sudo`: None
    when there is no sudo to ask, the login is root already, or it is not to be asked: a
    scope: user login never tries sudo)."""

    def command(self, sudo: bool = True) -> str:
        parts = {"uid": f"{EUID}\ngpurig_euid", "user": "id -un 2>/dev/null"}
        if sudo:
            parts["sudo"] = (
                f'{BOUNDED}\n{EUID}\n[ "$(gpurig_euid)" != 0 ] && command -v sudo >/dev/null 2>&1 '
                "&& { if bounded sudo -n true </dev/null 2>/dev/null; then echo yes; else echo no; "
                "fi; }"
            )
        return self.sectioned(parts)

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        uid = part_text(parts, "uid")
        if uid is not None and not uid.isdigit():
            raise ValueError(f"id -u printed {uid[:40]!r}")
        sudo = {"yes": True, "no": False, None: None}.get(part_text(parts, "sudo"))
        return {"uid": int(uid) if uid else None, "user": part_text(parts, "user"), "sudo": sudo}


# The root cgroup's memory files, v2 then v1 (memory.events counts the cgroup and its
# descendants on v2; memory.oom_control on v1).
_V2 = "[ -r /sys/fs/cgroup/cgroup.controllers ]"


class CgroupMemory(Sectioned[dict[str, Any]]):
    """This login's root memory cgroup: its limit in bytes (None: no limit) and the kernel's
    OOM kill count in it (a rented pod's own limit, or the whole host)."""

    def command(self) -> str:
        v2, v1 = "/sys/fs/cgroup", "/sys/fs/cgroup/memory"
        return self.sectioned({
            "limit": f"{LINES}\nif {_V2}; then gpurig_lines {v2}/memory.max; "
                     f"else gpurig_lines {v1}/memory.limit_in_bytes; fi 2>/dev/null",
            "oom_kill": f"{LINES}\nif {_V2}; then gpurig_field {v2}/memory.events oom_kill; "
                        f"else gpurig_field {v1}/memory.oom_control oom_kill; fi 2>/dev/null",
        })  # fmt: skip

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        limit = part_text(parts, "limit")
        if limit not in (None, "max") and not limit.isdigit():
            raise ValueError(f"memory limit: not a number of bytes: {limit[:40]!r}")
        return {
            "limit": int(limit) if limit and limit.isdigit() else None,
            "oom_kill": node_parse.count(parts.get("oom_kill")),
        }


class CgroupLeaks(Sectioned[dict[str, Any]]):
    """How many cgroups the host holds (dying ones included) and the root memory.stat's per-cpu
    kernel memory (v2): readings of leaking cgroups (node_parse; HostMemory has /proc/meminfo's)."""

    def command(self) -> str:
        return self.sectioned({
            "proc_cgroups": f"{LINES}\ngpurig_lines /proc/cgroups 2>/dev/null",
            "stat": f"{LINES}\n{_V2} && gpurig_lines /sys/fs/cgroup/cgroup.stat 2>/dev/null",
            "percpu": f"{LINES}\n{_V2} && gpurig_field /sys/fs/cgroup/memory.stat percpu "
                      "2>/dev/null",
        })  # fmt: skip

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        cgroups, stat = part_text(parts, "proc_cgroups"), part_text(parts, "stat")
        return {
            "count": node_parse.cgroup_count(cgroups, stat),
            "percpu": node_parse.percpu_bytes(part_text(parts, "percpu"), None),
        }


class HostMemory(Sectioned[dict[str, Any]]):
    """/proc/meminfo: the host's memory in bytes (what a container's tmpfs /dev/shm is judged
    against) and its per-cpu kernel memory (`Percpu: N kB`, every kernel since 4.16)."""

    def command(self) -> str:
        return self.sectioned({"meminfo": f"{LINES}\ngpurig_lines /proc/meminfo 2>/dev/null"})

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        fields = {}
        for line in (parts.get("meminfo") or "").splitlines():
            key, sep, value = line.partition(":")
            if sep and key in ("MemTotal", "Percpu"):
                fields[key] = value.strip()
        total = fields.get("MemTotal")
        total_kb = re.fullmatch(r"([0-9]+) kB", total) if total else None
        if total and total_kb is None:
            raise ValueError(f"/proc/meminfo MemTotal: unexpected value {total[:40]!r}")
        return {
            "total_bytes": int(total_kb[1]) * 1024 if total_kb else None,
            "percpu": node_parse.percpu_bytes(None, fields.get("Percpu")),
        }


class DiskSpace(Sectioned[list[dict[str, Any]]]):
    """Free space and inodes of the file system holding each path, one entry per path: one
    `df` of each kind for all the paths that exist (a process per path cost a node contract
    more than its disk check), or, where that one fails (a stale NFS handle), one per path,
    so a path that cannot be read costs only its own figures."""

    def command(self, paths: Sequence[str]) -> str:
        quoted = [shlex.quote(path) for path in paths]
        parts = {f"e{index}": f"[ -e {q} ] && echo exists" for index, q in enumerate(quoted)}
        given = "".join(f'[ -e {q} ] && set -- "$@" {q}\n' for q in quoted)
        for kind, flag in (("k", "-k"), ("i", "-i")):
            one = "\n".join(
                section("part", f"{kind}{index}", f"[ -e {q} ] && df -P {flag} -- {q} 2>/dev/null")
                for index, q in enumerate(quoted)
            )
            parts[kind] = (
                f'set --\n{given}[ "$#" -gt 0 ] || exit 0\n'
                f'if all=$(df -P {flag} -- "$@" 2>/dev/null); then printf \'%s\\n\' "$all"\n'
                f"else\n{one}\nfi"
            )
        self._paths = list(paths)
        return self.sectioned(parts)

    def process(self, output: list[str]) -> list[dict[str, Any]]:
        return self.entries(self._paths, self.split(output))

    @staticmethod
    def entries(paths: Sequence[str], parts: Mapping[str, str]) -> list[dict[str, Any]]:
        """One entry per path from the parts `command(paths)` printed."""
        exists = [part_text(parts, f"e{index}") == "exists" for index in range(len(paths))]
        rows = {kind: _df_rows(parts, kind, exists) for kind in ("k", "i")}
        found = []
        for index, path in enumerate(paths):
            blocks, inodes = df_line(rows["k"][index]), df_line(rows["i"][index])
            found.append({
                "path": path,
                "exists": exists[index],
                "mount": blocks["mount"] if blocks else None,
                "free_bytes": blocks["free"] * 1024 if blocks else None,
                "inodes_total": inodes["total"] if inodes else None,
                "inodes_free": inodes["free"] if inodes else None,
            })  # fmt: skip
        return found

    def default(self) -> list[dict[str, Any]]:
        return []


# Every file a login shell of this account reads, for the identity its answer is kept with
# (`stat -L`: a dotfile manager's link counts by what it leads to): the system's and the
# account's profiles, the shell itself and PAM's limits. `$shell` and `$login` are set first.
_LOGIN_FILES = (
    "/etc/profile /etc/profile.d/* /etc/bash.bashrc "
    '"$HOME/.profile" "$HOME/.bash_profile" "$HOME/.bash_login" "$HOME/.bashrc" '
    '"$shell" "$(command -v "$login")" /etc/security/limits.conf /etc/security/limits.d/*'
)
# Seconds a kept answer is used (re-asked at least this often: a file a profile sources is
# not in the key).
LOGIN_KEPT_S = 300
# A traced login's prefix: the file and line of each command it runs (bash repeats its first
# character once for each file sourced and each command substitution it is in).
_PS4 = shlex.quote("+${BASH_SOURCE}:${LINENO}: ")
# What a login shell reads, in bash's order (bash(1) INVOCATION), traced: root's locator.
_AS_LOGIN = shlex.quote(
    f"PS4={_PS4}; set -x\n"
    "if [ -r /etc/profile ]; then . /etc/profile; fi\n"
    'for f in "$HOME/.bash_profile" "$HOME/.bash_login" "$HOME/.profile"; do\n'
    '  if [ -r "$f" ]; then . "$f"; break; fi\n'
    "done"
)
# The traced commands that may set the core limit, at most 300 characters each (a longer line
# is dropped, never cut), the last LOGIN_TRACED of them, each behind `at `: what LoginShell
# parses, and all it keeps.
LOGIN_TRACED = 8
_TRACED_ULIMITS = (
    r"sed -e '/^+/!d' -e '/ulimit .*c/!d' -e '/^.\{301\}/d' -e 's/^/at /' | "
    f"sed -e :a -e '$q;N;{LOGIN_TRACED + 1},$D;ba'"
)
_LOGIN = f"""
if command -v bash >/dev/null 2>&1; then login=bash; else login=sh; fi
me='' kept='' up='' v='' w='' hit=''
while read -r k _ e _; do [ "$k" != Uid: ] || {{ me=$e; break; }}; done </proc/self/status
case $me in
  '') ;;
  0) kd=${{GPURIG_RUNTIME_DIR:-/run/gpurig}} ;;
  *) if [ -n "${{GPURIG_RUNTIME_DIR:-}}" ]; then kd=$GPURIG_RUNTIME_DIR
     elif [ -d "${{XDG_RUNTIME_DIR:-/nonexistent}}" ]; then kd=$XDG_RUNTIME_DIR/gpurig
     else kd=/tmp/podman-run-$me/gpurig; fi ;;
esac
read -r up _ </proc/uptime 2>/dev/null && up=${{up%.*}}
# As root, made only in a parent the walk finds root's alone, by its walked name: another
# account's link on the way would have had root make a directory where she pointed it.
if [ -n "$kd" ] && [ "$me" = 0 ] && [ ! -d "$kd" ]; then
  kp=${{kd%/*}}
  walk "${{kp:-/}}" && [ -z "$OWNER" ] && [ -d "$CHECKED" ] && [ -n "${{kd##*/}}" ] &&
    mkdir -m 700 -- "${{CHECKED%/}}/${{kd##*/}}" 2>/dev/null
fi
if [ -n "$kd" ] && [ -n "$up" ] && walk "$kd" && [ "${{OWNER:-0}}" = "$me" ] &&
  [ -d "$CHECKED" ]; then
  shell=''
  while IFS=: read -r _ _ u _ _ _ s; do [ "$u" != "$me" ] || {{ shell=$s; break; }}; done \
    </etc/passwd 2>/dev/null
  # ... and the limits it starts from (this session's, which PAM set at login). `2`: answers
  # kept with where a limit was set (one kept before, without, is asked again).
  key="2 $me $HOME $login $(ulimit -c; ulimit -H -c)
$(stat -L -c '%d %i %s %Y %Z %n' -- {_LOGIN_FILES} 2>/dev/null)"
  kept=$CHECKED/login
  if [ -f "$kept" ] && [ ! -L "$kept" ]; then
    had='' was=''
    {{ read -r at v && while IFS= read -r l; do case $l in
      'at '*) was="$was${{was:+
}}$l" ;;
      *) had="$had${{had:+
}}$l" ;;
    esac; done; }} <"$kept" 2>/dev/null
    case $at in
      '' | *[!0-9]*) ;;
      *) [ "$had" = "$key" ] && [ $((up - at)) -ge 0 ] && [ $((up - at)) -lt {LOGIN_KEPT_S} ] &&
        hit=1 w=$was ;;
    esac
  fi
fi
if [ -z "$hit" ]; then
  # The last line: a login file may print before `ulimit -c` does. Kept by the shell's own
  # read, and printed in the same braces: a variable set on a pipe's right side is gone once
  # the pipe ends (in a subshell).
  v=$(bounded "$login" -lc 'ulimit -c' </dev/null 2>/dev/null |
    {{ v=; while IFS= read -r l || [ -n "$l" ]; do v=$l; done; printf '%s\n' "$v"; }})
  # Where a limit that is not 0 comes from: a second, traced login (a host whose limit is 0
  # pays nothing). bash takes no PS4 from the environment as root: there the login's files are
  # sourced in bash's order by a shell that sets PS4 itself.
  if [ "$login" = bash ] && [ -n "$v" ] && [ "$v" != 0 ] && command -v sed >/dev/null 2>&1
  then
    if [ "$me" = 0 ]; then
      w=$(unset BASH_ENV ENV; bounded bash --noprofile --norc -c {_AS_LOGIN} </dev/null 2>&1 \
        >/dev/null | {_TRACED_ULIMITS})
    else
      w=$(PS4={_PS4}; export PS4; bounded bash -lxc 'ulimit -c' </dev/null 2>&1 >/dev/null |
        {_TRACED_ULIMITS})
    fi
  fi
  if [ -n "$kept" ] && [ -n "$v" ]; then
    {{ printf '%s %s\n' "$up" "$v"; [ -z "$w" ] || printf '%s\n' "$w"; printf '%s\n' "$key"
    }} >"$kept.$$" && mv -f -- "$kept.$$" "$kept"
  fi
fi
printf '%s\n' "$v"
[ -z "$w" ] || printf '%s\nhome %s\n' "$w" "$HOME"
"""


# A traced command that may set the core limit, as _TRACED_ULIMITS keeps it: `at `, PS4's
# file and line, then `ulimit` (or `builtin ulimit`, `command ulimit`) and its words.
_TRACED = lazy(
    r"at \++(?P<file>[^+\x00-\x1f\x7f][^\x00-\x1f\x7f]{0,255}):(?P<line>[0-9]{1,9}): "
    r"(?P<command>(?:(?:builtin|command) )?ulimit(?P<words>(?: [-A-Za-z0-9]{1,24}){1,8}))"
)
_HOME = lazy(r"home /[^\x00-\x1f\x7f]{0,255}")
# What `ulimit -c VALUE` accepts and prints (bash's `hard` and `soft` name another limit).
_CORE_VALUE = lazy(r"[0-9]{1,20}|unlimited|hard|soft")


def core_value(words: Sequence[str]) -> str | None:
    """The core limit a `ulimit` command's words set (`-c 0`, `-S -c unlimited`, `-Hc 0`,
    `-n 1024 -c 0`), or None where they set none (`-c` alone prints it)."""
    value = None
    for index, word in enumerate(words):
        if len(word) > 1 and word[0] == "-" and word[1:].isalpha() and word.endswith("c"):
            given = words[index + 1] if index + 1 < len(words) else ""
            if _CORE_VALUE.fullmatch(given):
                value = given
    return value


def _where(lines: Sequence[str], limit: str | None, home: str | None) -> dict[str, Any] | None:
    """The traced command that left the core limit at `limit`: the last one setting it to that
    value, else the last one setting it at all (a `hard` or `soft`), never one setting 0 (a
    limit of 0 that did not hold is not that line's doing). Its file is `~/...` under home."""
    found = []
    for line in lines:
        match = _TRACED.fullmatch(line)
        value = core_value(match["words"].split()) if match else None
        if match and value is not None and first_unsafe(match["file"], "") is None:
            found.append((match, value))
    chosen = next((m for m, value in reversed(found) if value == limit), None)
    if chosen is None and found and found[-1][1] != "0":
        chosen = found[-1][0]
    if chosen is None:
        return None
    path, home = chosen["file"], (home or "").rstrip("/")
    if home and path.startswith(home + "/"):
        path = "~/" + path[len(home) + 1 :]
    return {"file": path, "line": int(chosen["line"]), "command": chosen["command"]}


class LoginShell(Sectioned[dict[str, Any]]):
    """The core file limit a login shell ends up with (`ulimit -c` after /etc/profile,
    profile.d and the login's own ~/.profile, as an SSH session or `bash -l` reads them), and
    where a limit that is not 0 was set: {"ulimit_c", "where": {"file", "line", "command"}
    of the last `ulimit` that set it, or None}. bash's trace of a second login gives the file
    and line (`PS4`); nothing it prints runs, and only the last LOGIN_TRACED lines naming
    `ulimit`, of at most 300 characters each, leave the host.
    The answer is kept in the account's runtime directory (where the walk says only this
    account, or root alone, can change it), with the identity of every file such a shell
    reads, for LOGIN_KEPT_S: a node contract at every job start then pays a `stat`, not root's
    whole profile (a conda or pyenv init costs hundreds of milliseconds). A changed file is a
    new key: asked again at once."""

    def command(self) -> str:
        return self.sectioned({"ulimit_c": f"{SAFE_PATH}\n{BOUNDED}\n{_LOGIN}"})

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        first, *rest = (parts.get("ulimit_c") or "").strip("\n").split("\n")
        traced, home = [], None
        for line in rest:
            if line.startswith("at ") and len(traced) < LOGIN_TRACED:
                traced.append(line)
            elif line.startswith("home ") and home is None:  # the account's HOME, if plain
                home = line[len("home ") :] if _HOME.fullmatch(line) else ""
            else:
                raise ValueError(f"unexpected line: {line[:80]!r}")
        limit = first.strip() or None
        where = _where(traced, limit, home) if limit not in (None, "0") else None
        return {"ulimit_c": limit, "where": where}


ENGINES = ("docker", "podman")


class EngineVersions(Sectioned[dict[str, Any]]):
    """The first line of `docker --version` and `podman --version` (None: not installed)."""

    def command(self) -> str:
        return self.sectioned({
            tool: f"{BOUNDED}\ncommand -v {tool} >/dev/null 2>&1 && "
                  f"bounded {tool} --version 2>/dev/null | sed -n 1p"
            for tool in ENGINES
        })  # fmt: skip

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        return {tool: part_text(parts, tool) for tool in ENGINES}


class EngineSocket(Sectioned[dict[str, Any]]):
    """Whether an engine's API socket exists and answers `_ping` (`answers`: None when it
    cannot be asked: no socket, or no curl)."""

    def command(self, path: str) -> str:
        q = shlex.quote(path)
        return self.sectioned({"socket": (
            f"{BOUNDED}\n[ -S {q} ] || exit 0\necho socket\ncommand -v curl >/dev/null 2>&1 || "
            f"exit 0\necho asked\nbounded curl -s --max-time 5 --unix-socket {q} http://d/_ping"
        )})  # fmt: skip

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        lines = (parts.get("socket") or "").splitlines()
        answers = lines[2:] == ["OK"] if lines[:2] == ["socket", "asked"] else None
        return {"exists": lines[:1] == ["socket"], "answers": answers}
