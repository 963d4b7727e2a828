"""Host keys: fetch one before trusting it, show it as OpenSSH does, recognise a changed one.

Every connection checks the recorded key strictly; when it does not match, paramiko raises
`BadHostKeyException` and pyinfra turns that into `ConnectError("SSH host key error (...)")`
(printed as `[name] SSH host key error ...` by its CLI). Converge, drift and onboard all
recognise those here and say the same thing: what it may mean and what to do.
"""

from __future__ import annotations

import re

from gpurig.spec.digest import sha256
from gpurig.spec.pattern import lazy

# What paramiko (BadHostKeyException) and pyinfra (its ConnectError, its CLI log) say.
_MISMATCH = lazy(r"SSH host key error|Host key for (server )?\S+ does not match")
_ANSI = lazy(r"\x1b\[[0-9;]*m")
_CLI_LINE = lazy(r"^[ \t]*\[(?P<name>[^\]\s]+)\]\s+(?P<error>SSH host key error.*)$", re.MULTILINE)
# What gpurig.remote.jump says when the login node's key is not the pinned one
# (see jump_key_refusal).
_JUMP_REFUSAL = lazy(r"login node (?P<endpoint>\S+) \(ssh\.jump\): host key does not match")


# What follows the type name in each key type's public blob, every field an SSH string
# (RFC 4253 6.6 ssh-rsa, RFC 5656 3.1 ecdsa, RFC 8709 4 ed25519, OpenSSH PROTOCOL.u2f sk-*):
# an int is the field's exact length, bytes its exact value, None any non-empty value.
_BLOB_FIELDS: dict[str, tuple[int | bytes | None, ...]] = {
    "ssh-ed25519": (32,),
    "ssh-rsa": (None, None),  # e, n
    "ecdsa-sha2-nistp256": (b"nistp256", 65),  # curve, uncompressed point
    "ecdsa-sha2-nistp384": (b"nistp384", 97),
    "ecdsa-sha2-nistp521": (b"nistp521", 133),
    "sk-ssh-ed25519@openssh.com": (32, None),  # key, application
    "sk-ecdsa-sha2-nistp256@openssh.com": (b"nistp256", 65, None),
}


def _ssh_strings(raw: bytes) -> list[bytes] | None:
    """The SSH strings (uint32 length, then bytes) `raw` consists of; None if it is cut short."""
    fields, at = [], 0
    while at < len(raw):
        length = int.from_bytes(raw[at : at + 4], "big")
        if at + 4 + length > len(raw):
            return None
        fields.append(raw[at + 4 : at + 4 + length])
        at += 4 + length
    return fields


def key_problem(host_key: str) -> str | None:
    """Why `<type> <base64>` is not a whole public key of that type, or None.

    A key cut short in copying still decodes when it ends on a 4-character boundary; paramiko
    then loads it as a different key, and every connection reports a changed host key.
    """
    import base64  # only for an inventory that records host keys

    key_type, _, blob = host_key.partition(" ")
    try:
        fields = _ssh_strings(base64.b64decode(blob, validate=True))
    except ValueError:
        return "expected base64 key data after the key type"
    if not fields:
        return f"the key data is cut short (expected a whole {key_type} key)"
    embedded = fields[0].decode("ascii", "replace")
    if embedded != key_type:
        return f"key data is for {embedded!r}, not {key_type!r}"
    expected = _BLOB_FIELDS.get(key_type)
    if expected is None:
        return f"{key_type!r} is not a host key type gpurig knows"
    values = fields[1:]
    if len(values) != len(expected) or not all(map(_field_ok, values, expected)):
        return f"the key data is cut short or malformed for {key_type}"
    return None


def _field_ok(value: bytes, want: int | bytes | None) -> bool:
    if isinstance(want, int):
        return len(value) == want
    return value == want if want is not None else bool(value)


def fingerprint(host_key: str) -> str:
    """`SHA256:...` as `ssh-keygen -lf` and ssh's first-connection prompt print it."""
    import base64

    blob = base64.b64decode(host_key.split()[1])
    return "SHA256:" + base64.b64encode(sha256(blob).digest()).decode().rstrip("=")


def is_mismatch(error: BaseException | str) -> bool:
    """Whether a connection failed because the host key differs from the recorded one (by its
    words: paramiko's BadHostKeyException says so in its message)."""
    return bool(_MISMATCH.search(_ANSI.sub("", str(error))))


def jump_key_refusal(endpoint: str) -> str:
    """How a connection refused at the login node (the first hop) for its key says so."""
    return f"login node {endpoint} (ssh.jump): host key does not match ssh.jump.host_key"


def refused_jump(error: str) -> str | None:
    """The login node (`address:port`) whose key refused a connection, or None when the
    refusal, if any, was the host's own."""
    found = _JUMP_REFUSAL.search(_ANSI.sub("", error))
    return found["endpoint"] if found else None


def mismatched_hosts(log: str) -> dict[str, str | None]:
    """The hosts pyinfra's CLI refused for a changed host key, from its stderr: each name with
    the login node whose key it was, or None for the host's own key."""
    found: dict[str, str | None] = {}
    for match in _CLI_LINE.finditer(_ANSI.sub("", log)):
        found.setdefault(match["name"], refused_jump(match["error"]))
    return found


def changed_message(name: str, inventory: str, jump: str | None = None) -> str:
    """What to tell a person whose host's key changed, or (`jump`: its `address:port`) the
    key of the login node it is reached through: never a hint to just accept it."""
    if jump:
        return (
            f"{name}: the host key of its login node {jump} does not match ssh.jump.host_key "
            f"recorded in {inventory} (a re-installed login node, or worse): check the "
            "fingerprint with the cluster's admins; if the login node was re-installed, record "
            "its new key in ssh.jump.host_key"
        )
    return (
        f"{name}: host key does not match the one recorded in {inventory} (a re-rented "
        "address, or worse): check with the provider; if the machine was re-created, remove "
        "its host_key and run `gpurig onboard` again"
    )
