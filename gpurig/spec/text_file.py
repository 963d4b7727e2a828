"""A YAML file gpurig reads, before it is parsed: a regular file of bounded size, UTF-8, with
no control characters. Apart from the parser (gpurig.spec.safe_yaml), so that a spec whose
parse is kept (gpurig.spec.inventory) is read without loading a YAML parser."""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # a node contract reads its spec's bytes before its read starts
if TYPE_CHECKING:
    from pathlib import Path

# Ten thousand hosts, each with its address, SSH port, pinned host key and a four-key spec
# written out, are 4.4 MiB. At this size a comment or a scalar takes 0.2 s to parse with libyaml
# (4 s with PyYAML's pure-Python parser), and values are bounded by count
# (gpurig.spec.safe_yaml.MAX_WRITTEN).
MAX_BYTES = 8 * 1024**2
_TOO_LARGE = f"larger than {MAX_BYTES // 1024**2} MiB, the most gpurig reads as an inventory"


class YamlRefused(Exception):
    """Input gpurig will not parse; `line` is 1-based, None for the file as a whole."""

    def __init__(self, line: int | None, message: str) -> None:
        self.line = line
        self.message = message
        super().__init__(message if line is None else f"line {line}: {message}")


def read_bytes(path: str | Path) -> bytes:
    """The bytes of a regular file of at most MAX_BYTES; never blocks on a FIFO or a device.

    Raises YamlRefused for anything else (OSError's text included when it cannot be opened).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise YamlRefused(None, f"cannot read: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise YamlRefused(None, f"cannot read: not a regular file ({_kind(mode)})")
        chunks, size = [], 0
        while size <= MAX_BYTES and (chunk := os.read(fd, MAX_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise YamlRefused(None, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > MAX_BYTES:
        raise YamlRefused(None, _TOO_LARGE)
    return b"".join(chunks)


def read_text(path: str | Path) -> str:
    """read_bytes, decoded as UTF-8 (a byte order mark first, as some editors save, is not
    text) and checked by check_text."""
    raw = read_bytes(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise YamlRefused(line, f"cannot read: not UTF-8 (byte 0x{raw[exc.start]:02x})") from None
    check_text(text)
    return text


def check_text(text: str) -> None:
    """Refuse text too long or carrying control characters (tab, newline and CR are fine)."""
    from gpurig.spec.textsafe import escape_char, first_unsafe  # re: not before the read

    if len(text) > MAX_BYTES:
        raise YamlRefused(None, _TOO_LARGE)
    bad = first_unsafe(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        raise YamlRefused(line, f"control character {escape_char(bad[0])} is not allowed")


def _kind(mode: int) -> str:
    kinds = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISSOCK, "a socket")]  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "not a file")
