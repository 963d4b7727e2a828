"""What someone holding a log can do with it against a secret: take every word of the log as a
possible salt or key and test a guess of the secret against every digest in the log (shared
by the unit and integration suites)."""

from __future__ import annotations

import hashlib
import hmac
import re

_WORD = re.compile(r"[0-9A-Za-z+/_-]{16,}")


def guesses_confirmed(log: str, guess: bytes) -> list[str]:
    """The log words that, taken as a salt or an HMAC key, turn `guess` into a digest the log
    also holds: non-empty means the log confirms the guess (and so recovers a short secret)."""
    words = set(_WORD.findall(log))
    digests = {w.lower() for w in words if re.fullmatch(r"[0-9a-fA-F]{64}", w)}
    if not digests:
        return []
    found = []
    for word in words:
        for salt in {word.encode(), *([bytes.fromhex(word)] if len(word) % 2 == 0 and
                                      re.fullmatch(r"[0-9a-fA-F]+", word) else [])}:  # fmt: skip
            tries = (hashlib.sha256(salt + guess).hexdigest(),
                     hashlib.sha256(guess + salt).hexdigest(),
                     hmac.new(salt, guess, hashlib.sha256).hexdigest())  # fmt: skip
            if digests.intersection(tries):
                found.append(word)
    plain = hashlib.sha256(guess).hexdigest()
    return [*found, *(["(no salt)"] if plain in digests else [])]
