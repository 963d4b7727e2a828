"""The sandbox network: one bridge, and a network namespace with a veth per fleet host."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from gpurig.sandbox.proc import run

BRIDGE = "gpurig-br0"
NETWORK = ipaddress.ip_network("10.77.0.0/16")
GATEWAY = str(NETWORK.network_address + 1)


def host_address(index: int) -> str:
    """Fleet host `index` (1-based) lives at 10.77.1.1, 10.77.1.2, ... 250 per /24."""
    third, fourth = divmod(index - 1, 250)
    return str(NETWORK.network_address + 256 * (third + 1) + fourth + 1)


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def netns_exists(name: str) -> bool:
    return Path("/run/netns", name).exists()


def ensure_bridge() -> None:
    if not link_exists(BRIDGE):
        run(["ip", "link", "add", BRIDGE, "type", "bridge"])
    have = run(["ip", "-o", "-4", "addr", "show", "dev", BRIDGE]).stdout
    if f"{GATEWAY}/" not in have:
        run(["ip", "addr", "add", f"{GATEWAY}/{NETWORK.prefixlen}", "dev", BRIDGE])
    run(["ip", "link", "set", BRIDGE, "up"])


def remove_bridge() -> None:
    if link_exists(BRIDGE):
        run(["ip", "link", "del", BRIDGE])


def create_netns(netns: str, veth: str, address: str) -> None:
    """A namespace whose eth0 is wired to the bridge, with `address` and a default route."""
    remove_netns(netns, veth)
    run(["ip", "netns", "add", netns])
    run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns])
    run(["ip", "link", "set", veth, "master", BRIDGE, "up"])
    inside = ["ip", "-n", netns]
    run([*inside, "addr", "add", f"{address}/{NETWORK.prefixlen}", "dev", "eth0"])
    run([*inside, "link", "set", "eth0", "up"])
    run([*inside, "link", "set", "lo", "up"])
    run([*inside, "route", "add", "default", "via", GATEWAY])


def remove_netns(netns: str, veth: str) -> None:
    if link_exists(veth):
        run(["ip", "link", "del", veth])
    if netns_exists(netns):
        run(["ip", "netns", "del", netns])
