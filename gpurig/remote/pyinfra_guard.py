"""What gpurig changes in pyinfra 3.10's run, so one host cannot stop the others or reach the
operator. Installed by inventory.py (every converge) and by drift, onboarding and `up`.

- A host that dies in the middle of an operation, whose output an operation cannot read, or
  whose operation refuses while the run executes (with -y pyinfra builds each operation's
  commands then: a running container with drift raises OperationError there), fails alone.
  pyinfra catches OSError and SSHException around each shell command, but not what a host
  dying inside a file upload raises: paramiko's EOFError, or pyinfra's own ConnectError when
  the SFTP channel cannot open, nor an OperationError. It escapes the host's greenlet
  (printed as a traceback) and `greenlet.get()` re-raises it, which ends the run for every
  host. (A refusal raised while pyinfra prepares is the deploy's own: deploys/gpu_host.py.)
- pyinfra asks the operator for a sudo password whenever a command fails printing `sudo: a
  password is required`: any host can print that line, get the answer (sent back to it in
  PYINFRA_SUDO_PASSWORD), and on a terminal every host waits at the prompt; in CI getpass ends
  in EOFError. gpurig never prompts: the command fails, and the host is marked so drift and
  the converge can say why.
- pyinfra decodes each output line as strict UTF-8 in a reader greenlet: a byte 0xff kills the
  reader, nothing drains the channel any more, and a host printing more blocks (with no
  timeout) for ever. Lines are decoded with replacement here, and a command's output is bounded
  by lines as well as bytes (each line kept costs about 100 bytes of Python objects: 64 MiB of
  empty lines were 13 GB). Output past either bound is drained, not kept, and the command
  fails its host alone with a clear reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from queue import Queue
from typing import Any

from paramiko.ssh_exception import SSHException
from pyinfra import logger
from pyinfra.api import operations
from pyinfra.api.exceptions import ConnectError, OperationError
from pyinfra.connectors import local, ssh, util

from gpurig.checks.node import sudo_refused_message
from gpurig.facts.round_trip import Unreadable
from gpurig.read import bounds
from gpurig.remote import paramiko_mac

# The lines sudo prints when it would have to ask (pyinfra's own list).
SUDO_PASSWORD_LINES = util.SUDO_PASSWORD_REQUIRED_LINES
# Where the connector data says a host's sudo asked for a password.
SUDO_REFUSED = "gpurig_sudo_password_required"
# Where the connector data says why a host's command output was refused (OutputFlood).
FLOODED = "gpurig_output_flooded"
# At most this much output is kept from one command's stdout or stderr; the rest is drained
# and the command fails. The line bound keeps empty lines (about 100 bytes each once kept)
# to about 27 MB a stream; the largest real read (a fleet host's packages, a repo's CRLF
# files) is far below either bound.
MAX_LINE_BYTES = 8 << 20  # longer lines arrive cut in pieces (and fail their fact's parser)


class Flooded(util.OutputLine):
    """Put in place of the lines a stream printed past the bounds (never shown as output)."""


def _guard_operations() -> None:
    run = operations._run_host_op_with_context

    def guarded(state: Any, host: Any, op_hash: str) -> bool:
        try:
            return run(state, host, op_hash)
        except Unreadable as exc:  # an operation read what the host printed, and it was odd
            host.log_styled(
                f"the host's output could not be read ({exc}); this host stops here, the "
                "others go on",
                fg="red",
                log_func=logger.error,
            )
            return False
        except OperationError as exc:  # a refusal, in the words of the prepared one
            host.log_styled(f"gpurig: refused: {exc}", fg="red", log_func=logger.error)
            return False
        except (EOFError, ConnectError, SSHException, OSError) as exc:
            host.log_styled(
                f"connection lost in the middle of an operation ({exc or 'EOF'}); this host "
                "stops here, the others go on; converge it again once it is back",
                fg="red",
                log_func=logger.error,
            )
            return False

    operations._run_host_op_with_context = guarded


def never_prompt(host: Any, _arguments: Any, execute_command: Callable[[], Any]) -> Any:
    """pyinfra's `execute_command_with_sudo_retry` without the retry: no prompt, no password;
    output past the bounds fails the host (OutputFlood) and is dropped at once."""
    return_code, output = execute_command()
    marks = {line.buffer_name for line in output.combined_lines if isinstance(line, Flooded)}
    flooded = [stream for stream in ("stdout", "stderr") if stream in marks]
    if flooded:
        why = bounds.flood_reason(flooded)
        host.connector_data[FLOODED] = why
        raise bounds.OutputFlood(why)
    if (
        return_code != 0
        and output
        and any(line.line.strip() in SUDO_PASSWORD_LINES for line in output.combined_lines)
    ):
        host.connector_data[SUDO_REFUSED] = True
        logger.error(sudo_refused_message(host.name))
    return return_code, output


def _lines(io: Any) -> Iterator[Any]:
    """A buffer's lines as bytes where it can say so, each read at most MAX_LINE_BYTES long
    (paramiko's text-mode file decodes strictly and reads a line of any length)."""
    if hasattr(io, "FLAG_BINARY"):  # paramiko's ChannelFile
        io._flags |= io.FLAG_BINARY
    if not hasattr(io, "readline"):
        yield from io
        return
    while line := io.readline(MAX_LINE_BYTES):
        yield line


def bounded_read_buffer(
    name: str,
    io: Iterable[Any],
    output_queue: Queue[Any],
    print_output: bool = False,
    print_func: Callable[[str], str] | None = None,
) -> None:
    """pyinfra's `read_buffer`, decoding with replacement and keeping at most
    MAX_OUTPUT_LINES lines and MAX_OUTPUT_BYTES bytes (then a Flooded mark)."""
    kept = lines = 0
    for raw in _lines(io):
        if lines > bounds.MAX_OUTPUT_LINES or kept > bounds.MAX_OUTPUT_BYTES:
            continue  # keep draining: a full channel would block the host's command
        data = raw if isinstance(raw, bytes) else str(raw).encode("utf-8", "replace")
        kept += len(data)
        lines += 1
        if lines > bounds.MAX_OUTPUT_LINES or kept > bounds.MAX_OUTPUT_BYTES:
            output_queue.put(Flooded(name, ""))
            continue
        line = data.decode("utf-8", "replace").rstrip("\n")
        output_queue.put(util.OutputLine(name, line))
        if print_output:
            util.echo(print_func(line) if print_func else line, err=True)


def install() -> None:
    """Install the guards once (and paramiko's MAC check in C: gpurig.remote.paramiko_mac)."""
    if getattr(util, "gpurig_guarded", False):
        return
    paramiko_mac.install()
    _guard_operations()
    ssh.execute_command_with_sudo_retry = never_prompt
    local.execute_command_with_sudo_retry = never_prompt
    util.read_buffer = bounded_read_buffer
    util.gpurig_guarded = True  # type: ignore[attr-defined]
