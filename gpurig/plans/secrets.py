"""Secrets (`secrets`): files copied from the machine running gpurig, mode 0600 unless
declared. The host's copy is compared by an HMAC under a key this run shares with the host by
Diffie-Hellman (facts.gpurig_files.SecretDigests): the key is in no command line, output or
log, so no log lets anyone test guesses of a secret; the content never leaves this machine but
as an upload (deploys/secrets.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from gpurig.facts.gpurig_files import MODP_2048, SecretDigests
from gpurig.plans.change import Change
from gpurig.spec.user_scope import is_user


@cache
def _private() -> int:
    """This run's Diffie-Hellman private value (never printed, never sent), drawn where a
    spec first has secrets: a node contract without any draws none."""
    import secrets

    return secrets.randbits(256)


@cache
def public() -> str:
    """This run's Diffie-Hellman public value."""
    return format(pow(2, _private(), MODP_2048), "x")


def local_path(src: str) -> str:
    """Where a secret's `src` is on this machine (~ expanded)."""
    return os.path.expanduser(src)


def local_bytes(src: str) -> bytes:
    """The secret's `src` on this machine; OSError where it cannot be read."""
    with open(local_path(src), "rb") as f:
        return f.read()


def shared_key(host_public: str) -> bytes:
    """The key this run shares with the host that answered `host_public`."""
    theirs = int(host_public, 16)
    if not 1 < theirs < MODP_2048 - 1:
        raise ValueError("the host's public value is out of range")
    return pow(theirs, _private(), MODP_2048).to_bytes(256, "big")


def _content(src: str) -> bytes | None:
    try:
        return local_bytes(src)
    except OSError:
        return None


def local_digest(src: str, key: bytes) -> str | None:
    """HMAC-SHA256 of the local source under `key`, or None when it cannot be read."""
    import hashlib
    import hmac

    content = _content(src)
    return None if content is None else hmac.new(key, content, hashlib.sha256).hexdigest()


def plan(spec: Mapping[str, Any], read: Callable[..., Any]) -> list[Change]:
    declared = spec["secrets"]
    if not declared:
        return []
    found = read(SecretDigests, paths=sorted({s["dest"] for s in declared}), public=public())
    key = shared_key(found["public"]) if found["public"] else None
    # Every source is checked first: a typo changes nothing on the host.
    unreadable = [s["src"] for s in declared if _content(s["src"]) is None]
    if unreadable:
        return [
            Change(
                "secret.source",
                ", ".join(unreadable),
                "a readable file on this machine",
                "missing or unreadable",
                "copy no secret until every source exists",
                refused=True,
            )
        ]
    changes = []
    # Without a declared owner the file is the converge's account's: root's in system scope
    # (root or sudo places it), the login's in user scope (which places it as itself).
    default_owner = None if is_user(spec) else "root"
    for item in declared:
        dest, mode, owner = item["dest"], item["mode"], item.get("owner")
        expected_owner = owner or default_owner
        seen = found["files"].get(dest)
        data = {"src": item["src"], "dest": dest, "mode": mode, "owner": owner}
        if key is None:  # no python3 on the host: nothing to compare with, so upload
            seen, actual = None, "not comparable (no python3 on the host)"
        else:
            actual = "missing" if seen is None else "different content"
        if seen is None or seen["sha256"] != local_digest(item["src"], key):
            change_id = "secret.missing" if actual == "missing" else "secret.content"
            changes.append(
                Change(
                    change_id,
                    dest,
                    f"the content of {item['src']}",
                    actual,
                    f"upload {item['src']} to {dest}",
                    data=data,
                )
            )
            continue
        if int(seen["mode"], 8) != int(mode, 8):
            again = f"place {dest} again with mode {mode}"
            change = Change("secret.mode", dest, mode, seen["mode"], again, field="mode", data=data)
            changes.append(change)
        if expected_owner and seen["owner"] != expected_owner.split(":")[0]:
            again = f"place {dest} again, owned by {expected_owner}"
            change = Change("secret.owner", dest, expected_owner, seen["owner"], again,
                            field="owner", data=data)  # fmt: skip
            changes.append(change)
    return changes
