"""A host that blinks (a rental's sshd restarting, a packet lost in the handshake) is tried
again, a bounded number of times with a growing pause; a host that answered and refused (its
host key, the login) never is: a second try would only say the same, or guess at keys."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

RETRIES = 2  # tries after the first
MOST = 10
ENV_VAR = "GPURIG_CONNECT_RETRIES"  # the converge's inventory.py reads it (gpurig converge)
# pyinfra's words for a failure before any answer: no connection, a dropped handshake.
_BLINKS = ("Could not connect", "EOF error", "SSH error")
# ... and for an answer that refused: not tried again.
_ANSWERED = ("known_hosts", "Authentication", "host key", "Host key", "Bad authentication")


def blinked(message: str) -> bool:
    """Whether a connection failed before the host answered for itself (timed out, refused,
    reset, the handshake cut), so that trying again may reach it."""
    return message.startswith(_BLINKS) and not any(word in message for word in _ANSWERED)


def pause(tried: int) -> float:
    """Seconds to wait after the `tried`-th failed try: 0.5, 1, 2, then 2."""
    return min(0.5 * 2 ** (tried - 1), 2.0)


def from_env(environ: Mapping[str, str] = os.environ) -> int:
    """The retries `gpurig converge --connect-retries` passed on, else RETRIES."""
    value = environ.get(ENV_VAR, "")
    return int(value) if value.isdigit() and int(value) <= MOST else RETRIES


def pyinfra_data(retries: int) -> dict[str, Any]:
    """pyinfra's own retry of a failed connection, for the converge it runs."""
    return {
        "ssh_connect_retries": retries,
        "ssh_connect_retry_min_delay": pause(1),
        "ssh_connect_retry_max_delay": pause(MOST),
    }
