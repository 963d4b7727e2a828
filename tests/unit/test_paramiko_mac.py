"""paramiko's per-packet MAC check, once gpurig's guards are installed, is the standard
library's constant-time comparison, with the answers paramiko's own loop gives."""

from __future__ import annotations

import hmac

import paramiko.packet
from paramiko.hostkeys import constant_time_bytes_eq as paramikos_own  # bound before any patch

from gpurig.remote import pyinfra_guard


def test_the_packets_mac_is_compared_in_c_with_the_same_answers() -> None:
    pyinfra_guard.install()
    assert paramiko.packet.util.constant_time_bytes_eq is hmac.compare_digest
    mac = bytes(range(32))
    assert paramikos_own is not hmac.compare_digest
    for other in (mac, mac[:-1] + b"\x00", mac[:16], b"", bytes(32)):
        assert hmac.compare_digest(mac, other) is paramikos_own(mac, other)
