"""Credentials in values gpurig shows: compared as they are, printed as `<redacted>`.

One function, `redacted(key, value)`, for every place a declared or inspected value may reach a
report, a log or an exception: by the key's name, and by the value's own shape, since a key
name says nothing about `DATABASE_URL=postgres://u:pw@db/x` or a token passed as an argument.
What counts as a credential is data (gpurig/data/secrets.yaml, with its sources).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import cache
from typing import Any

from gpurig.data.tables import table
from gpurig.spec.pattern import lazy

REDACTED = "<redacted>"
# scheme://userinfo@ (RFC 3986 3.2.1): the password after the user's ':', or the whole userinfo
# when it is one word (a token as the user: https://ghp_...@github.com).
_USERINFO = lazy(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^/?#@\s]*)@")
_QUERY = lazy(r"(?P<head>[?&;](?P<name>[^=&;#\s]+)=)(?P<value>[^&;#\s]*)")
_WORD = lazy(r"[A-Za-z0-9+/=_.~-]+")
_OPTION = lazy(r"-{0,2}[A-Za-z][A-Za-z0-9_.-]*")  # `--api-key` of `--api-key=...`
_HEX = lazy(r"[0-9a-fA-F]+")


@cache
def _rules() -> tuple[re.Pattern[str], re.Pattern[str], dict[str, Any]]:
    data = table("secrets.yaml")
    words = "|".join(re.escape(w) for w in data["key_words"])
    prefixes = "|".join(re.escape(p) for p in data["prefixes"])
    token = re.compile(rf"(?:{prefixes})\S{{{data['prefix_tail']},}}")
    return re.compile(words, re.IGNORECASE), token, data


def _entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    return -sum(n / len(text) * math.log2(n / len(text)) for n in Counter(text).values())


def secret_key(key: str) -> bool:
    """Whether a name (an env key, a query parameter) says its value is a credential."""
    return bool(_rules()[0].search(key))


def looks_secret(value: str) -> bool:
    """Whether a value is a credential by its shape alone: a known token prefix, or one long
    word as random as a key."""
    _, token, data = _rules()
    if token.fullmatch(value.strip()):
        return True
    if len(value) < data["entropy_length"] or not _WORD.fullmatch(value):
        return False
    alphabet = "hex" if _HEX.fullmatch(value) else "base64"
    return _entropy(value) > data["entropy_limits"][alphabet]


def _url(value: str) -> str:
    """A URL with its userinfo password (or token user) and credential query values hidden."""

    def info(match: re.Match[str]) -> str:
        user, colon, _ = match["info"].partition(":")
        hidden = f"{user}:{REDACTED}" if colon else REDACTED
        return f"{match['head']}{hidden if match['info'] else ''}@"

    def query(match: re.Match[str]) -> str:
        hide = secret_key(match["name"]) or looks_secret(match["value"])
        return match["head"] + (REDACTED if hide and match["value"] else match["value"])

    return _QUERY.sub(query, _USERINFO.sub(info, value))


def redacted(key: str, value: Any) -> Any:
    """`value` as gpurig may print it: `<redacted>` when `key` names a credential or the value
    looks like one, `--name=<redacted>` for such an option, a URL with its credentials hidden,
    anything else unchanged. `key` is "" where there is no name (a remote's URL)."""
    if not isinstance(value, str) or not value:
        return value
    if (key and secret_key(key)) or looks_secret(value):
        return REDACTED
    name, equals, rest = value.partition("=")
    if equals and _OPTION.fullmatch(name) and rest and (secret_key(name) or looks_secret(rest)):
        return f"{name}={REDACTED}"
    return _url(value)
