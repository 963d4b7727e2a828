"""Characters that change how text looks rather than what it says, shared by the inventory
loader (which refuses them) and the reports (which show them escaped).

Hosts are untrusted: a GPU name, a file name or an error message can carry a terminal escape
that clears the screen, a carriage return that overwrites a line, a bidirectional override that
reorders it, or a byte that XML 1.0 forbids. None of these may reach a report as itself.
"""

from __future__ import annotations

import re

from gpurig.spec.pattern import lazy

# Every character Unicode classes as a control (Cc: C0, DEL, C1), a format character (Cf: the
# bidirectional marks, embeddings, overrides and isolates, U+061C, zero-width characters, the
# soft hyphen, the byte order mark, tag characters ...) or a line or paragraph separator (Zl,
# Zp); lone surrogates (undecodable bytes); and the two noncharacters XML 1.0 forbids. Tab,
# newline and CR are in it too: callers keep what their format allows. Spelled out (a scan of
# unicodedata costs start-up); tests/unit/test_report.py checks it against unicodedata.
UNSAFE = lazy(
    "[\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff"
    "\ufff9-\ufffb\ufffe\uffff\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)

_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def escape_char(char: str) -> str:
    """`\\x1b`, `\\r`, `\\u202e`: the character as a Python string literal would spell it."""
    code = ord(char)
    if code > 0xFFFF:
        return f"\\U{code:08x}"
    return _SHORT.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: str, keep: str = "") -> str:
    """`text` with every unsafe character but those in `keep` (e.g. "\\n") escaped."""
    if _plain(text, keep):
        return text
    return UNSAFE.sub(lambda m: m[0] if m[0] in keep else escape_char(m[0]), text)


def first_unsafe(text: str, allowed: str = "\t\n\r") -> re.Match[str] | None:
    """The first unsafe character in `text` other than those `allowed`, or None."""
    if _plain(text, allowed):
        return None
    for match in UNSAFE.finditer(text):
        if match[0] not in allowed:
            return match
    return None


def _plain(text: str, keep: str) -> bool:
    """Printable ASCII but for `keep`: nothing to find, without compiling UNSAFE (a node
    contract's report is plain, and the pattern costs a millisecond at each start)."""
    if not text.isascii():
        return False
    for char in keep:
        text = text.replace(char, "")
    return text.isprintable()
