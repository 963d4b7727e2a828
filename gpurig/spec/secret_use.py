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
# Bytes of a secret file read (a token or a .netrc, not a dataset).
MAX_READ = 65536
# Words after which a secret file says its credential ('password s3cr3t', 'token: ...'; a
# .netrc's `account` is a second password), and the words of a .netrc that are none (with
# the host after `machine`): a credential is compared whatever its length, these never.
_SAYS_CREDENTIAL = frozenset({"password", "passwd", "token", "secret", "account"})
_NETRC_WORDS = frozenset({"machine", "default", "login", "password", "account", "macdef"})
# A word of a secret file this long is compared whatever it says (a password, a token, a key).
_LONG_WORD = 8
# Around a word of a secret file: quotes and a list's comma ('"password": "s3cr3t",' in JSON).
_QUOTES = "\"',"


def _is_credential_key(key: str) -> bool:
    """Whether a KEY=VALUE name says its value is a credential (HF_TOKEN, DB_PASSWORD, ...)."""
    return bool(_QUERY_CREDENTIAL.search(key)) or key.upper().endswith(("PASS", "PWD"))


def secret_values(text: str) -> set[str]:
    """What in a secret file's text is a credential, whatever its length and shape: the whole
    content, each line (a file of several credentials, one per line), the word after
    `password`, `passwd`, `token`, `secret` or `account`, the value of a KEY=VALUE whose key
    names a credential, and any other word of 8 characters or more. Never a .netrc's own words
    (`machine`, `login`, `default`, ...) or the host after `machine`."""
    words = text.split()
    hosts = {after for word, after in zip(words, words[1:]) if word == "machine"}
    trivial = _NETRC_WORDS | hosts
    found = {text.strip()}
    found.update(line.strip() for line in text.splitlines())
    for i, raw in enumerate(words):
        word = raw.strip(_QUOTES)
        if raw.strip(f"{_QUOTES}:=").lower() in _SAYS_CREDENTIAL and i + 1 < len(words):
            found.add(words[i + 1].strip(_QUOTES))
        name, equals, value = word.partition("=")
        value = value.strip(_QUOTES)
        if equals and name and value and (_is_credential_key(name) or len(value) >= _LONG_WORD):
            found.add(value)
        if len(word) >= _LONG_WORD:
            found.add(word)
    # a value with no letter or digit ('{', '}' of a JSON key file) is no one's credential
    return {v for v in found if v not in trivial and any(c.isalnum() for c in v)}


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
