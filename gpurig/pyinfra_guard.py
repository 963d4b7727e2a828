"""A host that dies in the middle of an operation fails alone.

pyinfra 3.10 catches OSError and SSHException around each shell command, but not what a host
dying inside a file upload raises: paramiko's EOFError, or pyinfra's own ConnectError when the
SFTP channel cannot open. It escapes the host's greenlet, and `greenlet.get()` re-raises it for
the whole run ("An internal exception occurred"): every other host loses its remaining
operations. Installed by inventory.py, so every converge has it.
"""

from __future__ import annotations

from typing import Any

from paramiko.ssh_exception import SSHException
from pyinfra import logger
from pyinfra.api import operations
from pyinfra.api.exceptions import ConnectError


def install() -> None:
    """Wrap pyinfra's per-host operation runner once: a lost connection fails that host."""
    run = operations._run_host_op_with_context
    if getattr(run, "gpurig_guarded", False):
        return

    def guarded(state: Any, host: Any, op_hash: str) -> bool:
        try:
            return run(state, host, op_hash)
        except (EOFError, ConnectError, SSHException, OSError) as exc:
            host.log_styled(
                f"connection lost in the middle of an operation ({exc or 'EOF'}); this host "
                "stops here, the others go on; converge it again once it is back",
                fg="red",
                log_func=logger.error,
            )
            return False

    guarded.gpurig_guarded = True  # type: ignore[attr-defined]
    operations._run_host_op_with_context = guarded
