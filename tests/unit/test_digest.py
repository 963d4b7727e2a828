"""The SHA-256 the files plan compares with what sha256sum printed on the host."""

from __future__ import annotations

import hashlib
import subprocess

from gpurig.spec.digest import sha256_hex


def test_the_digest_is_sha256sums() -> None:
    for data in (b"", b"ulimit -c 0\n", bytes(range(256)) * 1000):
        said = subprocess.run(["sha256sum"], input=data, capture_output=True, check=True)
        assert sha256_hex(data) == said.stdout.split()[0].decode()
        assert sha256_hex(data) == hashlib.sha256(data).hexdigest()
