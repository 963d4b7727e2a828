"""How much of what a host prints gpurig keeps, in one place for the SSH guard
(pyinfra_guard) and the node's own read (local_read). Each line kept costs about 100 bytes of
Python objects, so output is bounded by lines as well as bytes: 64 MiB of empty lines were
13 GB. Past either bound the output is refused, and the host's read fails alone."""

from __future__ import annotations

from collections.abc import Sequence

MAX_OUTPUT_BYTES = 64 << 20
MAX_OUTPUT_LINES = 1 << 18
FLOOD_PREFIX = "the host printed more than"
# Seconds for a host's whole read (the one command): engines and GPUs can be slow to answer.
PROBE_TIMEOUT = 120


class OutputFlood(OSError):
    """A command printed past the bounds. An OSError, so pyinfra fails that host's fact or
    operation alone, as it does for a broken connection; the node's own read refuses it too."""


def flood_reason(streams: Sequence[str]) -> str:
    """Why a command's output was refused, naming the streams that passed a bound."""
    return (
        f"{FLOOD_PREFIX} {MAX_OUTPUT_LINES} lines or {MAX_OUTPUT_BYTES} bytes "
        f"on {' and '.join(streams)}: its output is refused"
    )
