"""Files gpurig manages, seen through a digest, mode and owner: content is never read back.

A secret's digest must not let anyone holding a log (pyinfra prints every command at -vv and
every output at -vvv) test guesses of a short secret, so it is keyed with a key that appears in
no log: a Diffie-Hellman exchange inside the one round trip. The command carries this run's
public value, the host answers with its own and an HMAC-SHA256 of each file under the shared
key; the private values never leave their processes. Other managed files (config that is no
secret) are compared by plain sha256.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from gpurig.facts.reader import Reader
from gpurig.spec.pattern import lazy
from gpurig.spec.user_scope import shell_path

_ROW = lazy(r"(?P<i>\d+) (?P<sha>[0-9a-f]{64}) (?P<mode>[0-7]{1,4}) (?P<owner>\S+)")
# RFC 3526, section 3: the 2048-bit MODP group (group 14, as SSH's diffie-hellman-group14 uses
# it), generator 2. tests/unit/test_code_facts.py compares it with paramiko's copy.
MODP_2048 = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74"
    "020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437"
    "4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF05"
    "98DA48361C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB"
    "9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF695581718"
    "3995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF",
    16,
)
_PUBLIC = lazy(r"public (?P<value>[0-9a-f]{1,512})")
NO_PYTHON = "gpurig-no-python3"
# The system's python3 by its absolute path (a `python3` found on PATH may be another user's),
# run as root in isolated mode without site (-I -S): nothing from the working directory, the
# environment or site-packages is imported. O_NOFOLLOW and O_NONBLOCK: a symlink or a FIFO
# planted at a path is not a file (and cannot hang the read).
PYTHON = "/usr/bin/python3"
# The exponent from os.urandom, which the secrets module reads too: importing it (and random)
# took 11 ms of this read on a sandbox host.
_SECRET_DIGESTS = f"""
import hmac, os, pwd, stat, sys
p = {MODP_2048:#x}
theirs = int(sys.argv[1], 16)
if not 1 < theirs < p - 1:
    sys.exit("gpurig: public value out of range")
mine = int.from_bytes(os.urandom(32), "big")
key = pow(theirs, mine, p).to_bytes(256, "big")
print("public", format(pow(2, mine, p), "x"))
for i, path in enumerate(sys.argv[2:]):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        continue
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            continue
        mac = hmac.new(key, digestmod="sha256")
        while chunk := f.read(1 << 16):
            mac.update(chunk)
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    print(i, mac.hexdigest(), format(stat.S_IMODE(st.st_mode), "o"), owner)
"""


def _rows(output: list[str], paths: list[str]) -> dict[str, Any]:
    """{path: {"sha256", "mode", "owner"} or None} from `INDEX DIGEST MODE OWNER` lines."""
    found: dict[str, Any] = {path: None for path in paths}
    for line in output:
        match = _ROW.fullmatch(line.strip())
        if match is None or int(match["i"]) >= len(paths):
            raise ValueError(f"unexpected line: {line[:80]!r}")
        found[paths[int(match["i"])]] = {
            "sha256": match["sha"],
            "mode": match["mode"],
            "owner": match["owner"],
        }
    return found


class FileDigests(Reader[dict[str, Any]]):
    """{path: {"sha256", "mode", "owner"} or None when it is not a regular file}."""

    @staticmethod
    def default() -> dict[str, Any]:
        return {}

    def command(self, paths: Sequence[str]) -> str:
        self._paths = list(paths)
        lines = []
        for i, path in enumerate(paths):
            p = shell_path(path)  # a user's `~/...` is read from its own home
            lines.append(
                f"if [ -f {p} ] && [ ! -L {p} ]; then echo {i} "
                f"$(sha256sum < {p} | cut -c1-64) $(stat -c '%a %U' {p}); fi"
            )
        return "\n".join(lines)

    def process(self, output: list[str]) -> dict[str, Any]:
        return _rows(output, self._paths)


class SecretDigests(Reader[dict[str, Any]]):
    """{"public": the host's DH public value (hex) or None without python3, "files": {path:
    {"sha256": HMAC-SHA256 under the shared key, "mode", "owner"} or None}}. `public` is the
    reader's own public value (hex), made from a private value only it holds."""

    @staticmethod
    def default() -> dict[str, Any]:
        return {"public": None, "files": {}}

    def command(self, paths: Sequence[str], public: str) -> str:
        self._paths = list(paths)
        args = " ".join(shlex.quote(a) for a in [public, *paths])
        script = shlex.quote(_SECRET_DIGESTS)
        return (
            f"[ -x {PYTHON} ] || {{ echo {NO_PYTHON}; exit 0; }}\n{PYTHON} -I -S -c {script} {args}"
        )

    def process(self, output: list[str]) -> dict[str, Any]:
        if output and output[0].strip() == NO_PYTHON:
            return {"public": None, "files": {path: None for path in self._paths}}
        first = _PUBLIC.fullmatch(output[0].strip()) if output else None
        if first is None or not 1 < int(first["value"], 16) < MODP_2048 - 1:
            raise ValueError(f"no public value: {(output or [''])[0][:80]!r}")
        return {"public": first["value"], "files": _rows(output[1:], self._paths)}
