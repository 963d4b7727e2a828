"""Credentials the spec would put where other accounts read them: a declared secret's value
written into a container's `command` or `env` (the engine's command line, `inspect` for anyone
in its group), and a credential in a repo URL's query (git's argv, `.git/config`). Redaction
hides them in gpurig's reports; these keep them out of the host."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

from gpurig.spec.pattern import lazy

# Query parameters that carry a credential (GitLab's private_token, OAuth's access_token, ...).
_QUERY_CREDENTIAL = lazy(r"token|secret|passw|key|auth|credential|sig", re.IGNORECASE)
# A word of a secret file that is a credential: long, with letters and digits (a .netrc's
# `machine` and host names are not).
_TOKEN_WORD = lazy(r"(?=[^\s]*[0-9])(?=[^\s]*[A-Za-z])[^\s:=\"']{16,}")
# Bytes of a secret file read (a token or a .netrc, not a dataset).
MAX_READ = 65536


def secret_values(text: str) -> set[str]:
    """What in a secret file's text is a credential: the whole of a one-line file (a token
    file), and each long word with letters and digits (a .netrc's password)."""
    found = set(_TOKEN_WORD.findall(text))
    whole = text.strip()
    if whole and "\n" not in whole and len(whole) >= 8:
        found.add(whole)
    return found


def _read(src: str) -> str:
    try:
        with open(os.path.expanduser(src), "rb") as f:
            return f.read(MAX_READ).decode("utf-8", "replace")
    except OSError:
        return ""  # validate reads what it can; the converge says what it cannot upload


def leaked_secrets(spec: Mapping[str, Any]) -> Iterator[tuple[tuple[Any, ...], str]]:
    """(key path in the spec, why) for each place the spec puts a credential in view; the
    value itself is never said."""
    for name, repo in (spec.get("repos") or {}).items():
        from urllib.parse import parse_qsl, urlsplit  # with ipaddress: only for a spec's repos

        query = urlsplit(str(repo.get("url", ""))).query
        for key, _ in parse_qsl(query, keep_blank_values=True):
            if _QUERY_CREDENTIAL.search(key):
                yield (
                    ("repos", name, "url"),
                    f"the URL's query carries a credential ({key}=), which git would keep in "
                    "its command line and .git/config; give the token as the URL's user or "
                    "password (https://TOKEN@host/...), which gpurig hands git from a private "
                    "file",
                )
    secrets = [(s, secret_values(_read(s["src"]))) for s in spec.get("secrets") or []]
    if not any(values for _, values in secrets):
        return
    for name, container in (spec.get("containers") or {}).items():
        places = [(("env", key), str(value)) for key, value in (container.get("env") or {}).items()]
        places += [
            (("command", i), str(arg)) for i, arg in enumerate(container.get("command") or [])
        ]
        for where, text in places:
            for secret, values in secrets:
                if any(value in text for value in values):
                    yield (
                        ("containers", name, *where),
                        f"holds the value of the secret {secret['src']} (placed at "
                        f"{secret['dest']}): on the engine's command line and in its inspect "
                        "output it is readable by other accounts; mount the placed file into "
                        "the container and read it there (secrets:)",
                    )
                    break
