"""A host that dies in the middle of an operation fails alone.

pyinfra 3.10 catches OSError and SSHException around each command, but paramiko raises
EOFError when the connection drops mid-command; it escapes the host's greenlet, and
`greenlet.get()` re-raises it for the whole run ("An internal exception occurred"): every other
host loses its remaining operations. Installed by inventory.py, so every converge has it.
"""

from __future__ import annotations

from typing import Any

from pyinfra import logger
from pyinfra.api import operations


def install() -> None:
    """Wrap pyinfra's per-host operation runner once: a lost connection fails that host."""
    run = operations._run_host_op_with_context
    if getattr(run, "gpurig_guarded", False):
        return

    def guarded(state: Any, host: Any, op_hash: str) -> bool:
        try:
            return run(state, host, op_hash)
        except EOFError as exc:
            host.log_styled(
                f"connection lost in the middle of an operation ({exc or 'EOF'}); this host "
                "stops here, the others go on; converge it again once it is back",
                fg="red",
                log_func=logger.error,
            )
            return False

    guarded.gpurig_guarded = True  # type: ignore[attr-defined]
    operations._run_host_op_with_context = guarded
