"""SHA-256 without `hashlib`: hashlib loads OpenSSL's libcrypto first (about 7 ms, more than a
node contract's whole judging), where the interpreter's own SHA-256 module gives the same
digest. That module is named `_sha2` from Python 3.12, `_sha256` before; a build without it
(a FIPS-restricted one) uses hashlib."""

from __future__ import annotations

import sys

try:
    if sys.version_info >= (3, 12):
        from _sha2 import sha256
    else:
        from _sha256 import sha256
except ImportError:  # pragma: no cover - a build without the interpreter's own module
    from hashlib import sha256


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of `data` in lower-case hex, as sha256sum prints it."""
    return sha256(data).hexdigest()
