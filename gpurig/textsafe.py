"""Characters that change how text looks rather than what it says, shared by the inventory
loader (which refuses them) and the reports (which show them escaped).

Hosts are untrusted: a GPU name, a file name or an error message can carry a terminal escape
that clears the screen, a carriage return that overwrites a line, a bidirectional override that
reorders it, or a byte that XML 1.0 forbids. None of these may reach a report as itself.
"""

from __future__ import annotations

import re

# C0 controls (tab, newline and CR included: callers keep what their format allows), DEL, C1,
# the Unicode line and paragraph separators, bidirectional embeddings, overrides and isolates,
# lone surrogates (undecodable bytes) and the two noncharacters XML 1.0 forbids.
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")

_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def escape_char(char: str) -> str:
    """`\\x1b`, `\\r`, `\\u202e`: the character as a Python string literal would spell it."""
    code = ord(char)
    return _SHORT.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: str, keep: str = "") -> str:
    """`text` with every unsafe character but those in `keep` (e.g. "\\n") escaped."""
    return UNSAFE.sub(lambda m: m[0] if m[0] in keep else escape_char(m[0]), text)


def first_unsafe(text: str, allowed: str = "\t\n\r") -> re.Match[str] | None:
    """The first unsafe character in `text` other than those `allowed`, or None."""
    for match in UNSAFE.finditer(text):
        if match[0] not in allowed:
            return match
    return None
