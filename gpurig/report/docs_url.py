"""The documentation's address a report links each finding id to: `gpurig drift --docs-url
URL`, or GPURIG_DOCS_URL. An id's page is `URL/findings/ID/`: docs/hooks.py makes
`findings/ID.md` for every id, which MkDocs serves at that address.

The address is checked once, where it is given: an http or https address of a host, nothing in
it a reader cannot see, no user or password (a report is read by others), no query or fragment
(the pages go under its path). A page's address is written percent-encoded, so it stays one
link in Markdown and plain text in XML whatever the path holds."""

from __future__ import annotations

ENV = "GPURIG_DOCS_URL"
# What a page's address keeps as it is: RFC 3986's unreserved characters, `%` of its escapes,
# and delimiters that mean nothing to Markdown or XML. The rest (`()<>[]|'"&\` ...) is encoded.
_SAFE = "/:@!$*+,;=%-._~"
_HEX = "0123456789abcdefABCDEF"


def checked(value: str) -> str:
    """`value` as the documentation's address, its trailing slashes dropped; ValueError says
    what is wrong with it."""
    from urllib.parse import urlsplit

    if not value:
        raise ValueError("empty: give the documentation's address, https://...")
    for char in value:
        if char.isspace() or not char.isprintable():
            raise ValueError(f"{char!r} in it: no whitespace or control characters")
    if not value.isascii():
        raise ValueError("not ASCII: give the host's xn-- name and the path percent-encoded")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  (a port out of range or not a number raises)
    except ValueError as exc:
        raise ValueError(f"not an address: {exc}") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http:// or https:// address with a host")
    if "@" in parts.netloc:
        raise ValueError("a user or password in it: a report is read by others")
    if "?" in value or "#" in value:
        raise ValueError("a query or fragment in it: the finding pages go under its path")
    escapes = value.split("%")[1:]
    if any(len(e) < 2 or e[0] not in _HEX or e[1] not in _HEX for e in escapes):
        raise ValueError("a % that starts no %XX escape")
    return value.rstrip("/")


def page(docs_url: str, finding_id: str) -> str:
    """The address of `finding_id`'s page under `docs_url` (a `checked` one), percent-encoded."""
    from urllib.parse import quote

    return f"{quote(docs_url, safe=_SAFE)}/findings/{quote(finding_id, safe='')}/"
