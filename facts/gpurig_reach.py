"""What onboarding's preflight reads to judge whether the host reaches its sources.

`AptSources` prints the host's apt source files and apt's proxy settings (parsed strictly by
gpurig.read.sources); `Reach` tries a TCP connection to each checked endpoint from the
host itself, all at once, each bounded by the timeout, so a blocked network costs one timeout,
not one per source and never apt's minutes of retries.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

from gpurig.facts.reader import Reader
from gpurig.facts.round_trip import START, section, sections
from gpurig.read.sources import Endpoint, checked_host

SOURCE_FILES = (
    "/etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources"
)
MAX_FILE_BYTES = 65536
_PROXY = re.compile(r'^Acquire::(https?)::Proxy "([^"]*)";$')


class AptSources(Reader[dict[str, Any]]):
    """{"files": {path: text}, "proxies": {scheme: url}}; a host without apt has no files."""

    shell_executable = "sh"

    @staticmethod
    def default() -> dict[str, Any]:
        return {"files": {}, "proxies": {}}

    def command(self) -> str:
        proxies = (
            "command -v apt-config >/dev/null 2>&1 && apt-config dump 2>/dev/null"
            " | grep -E '^Acquire::https?::Proxy \"' || true"
        )
        read = f'head -c {MAX_FILE_BYTES} "$f"; echo'
        each, after = section("apt", '"$f"', read), section("apt", '""', proxies)
        return (
            f"{START}\nfor f in {SOURCE_FILES}; do\n"
            f'  [ -f "$f" ] || continue\n{each}\ndone\n{after}'
        )

    def process(self, output: list[str]) -> dict[str, Any]:
        files = sections(output, "apt")
        proxies = [_PROXY.match(line) for line in files.pop("", [])]  # after the bare marker
        return {
            "files": {p: "\n".join(lines) for p, lines in files.items()},
            "proxies": {m.group(1): m.group(2) for m in proxies if m},
        }


# What bash prints when a connection fails, in words a user acts on.
_REASONS = (
    ("connection refused", ("Connection refused",)),
    (
        "the name does not resolve",
        ("Name or service not known", "name resolution", "No address associated"),
    ),
    ("no route to the host", ("No route to host", "Network is unreachable")),
)


def reason(code: int, error: str, timeout: float) -> str:
    """Why a connection attempt failed, from the exit code and bash's message."""
    if code in (124, 137):
        return f"no answer within {timeout:g} s"
    if code == 127 and "no bash" in error:
        return "not checked: the host has no bash to test with"
    for words, phrases in _REASONS:
        if any(p in error for p in phrases):
            return words
    return f"could not connect (exit {code}: {error.strip()[:120] or 'no message'})"


class Reach(Reader[dict[str, Any]]):
    """{endpoint text: None when it connected, else why not}, for `targets` tried in parallel."""

    shell_executable = "sh"

    @staticmethod
    def default() -> dict[str, Any]:
        return {}

    def command(self, targets: Sequence[tuple[str, int]], timeout: float) -> str:
        self._targets = [Endpoint(host, port) for host, port in targets]
        self._timeout = timeout
        lines = [
            "try() {",
            "  if command -v bash >/dev/null 2>&1; then",
            f'    err=$(timeout {timeout:g} bash -c \'exec 3<>"/dev/tcp/$1/$2"\' _ "$2" "$3" '
            "2>&1); rc=$?",
            '  else err="no bash"; rc=127; fi',
            "  printf '%s %s %s\\n' \"$1\" \"$rc\" \"$(printf '%s' \"$err\" | tr '\\n' ' ')\"",
            "}",
        ]
        for index, target in enumerate(self._targets):
            # Checked again here: only a host name or address and a number reach the shell.
            host, port = shlex.quote(checked_host(target.host)), int(target.port)
            lines.append(f"try {index} {host} {port} &")
        lines.append("wait")
        return "\n".join(lines)

    def process(self, output: list[str]) -> dict[str, Any]:
        results: dict[str, Any] = {}
        for line in output:
            index, code, error = [*line.split(" ", 2), ""][:3]
            if not (index.isdigit() and code.isdigit()) or int(index) >= len(self._targets):
                continue
            target = str(self._targets[int(index)])
            results[target] = None if code == "0" else reason(int(code), error, self._timeout)
        for target in self._targets:  # a try that printed nothing did not connect
            results.setdefault(str(target), "the host printed no result")
        return results
