"""paramiko checks each SSH packet's MAC with a loop over its bytes in Python
(`paramiko.util.constant_time_bytes_eq`): for a drift, 70-odd packets a host and about 2 ms of
the controller's CPU each host, at a thousand hosts the largest cost after the network
(benchmarks/README.md). The standard library's `hmac.compare_digest` is the same comparison,
in constant time and False for different lengths, done in C."""

from __future__ import annotations

import hmac

import paramiko.util


def install() -> None:
    """paramiko's packets checked by hmac.compare_digest (packet.py calls it through util)."""
    paramiko.util.constant_time_bytes_eq = hmac.compare_digest
