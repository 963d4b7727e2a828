"""The sandbox network: one bridge per sandbox, and a network namespace with a veth per fleet
host. Names and subnets come from the sandbox's allocation (gpurig/sandbox/alloc.py)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from gpurig.sandbox.proc import run


def host_address(network: str, index: int) -> str:
    """Fleet host `index` (1-based) lives at .1.1, .1.2, ... of the bridge's subnet, 250
    per /24 (the gateway is .0.1)."""
    third, fourth = divmod(index - 1, 250)
    return str(ipaddress.ip_network(network).network_address + 256 * (third + 1) + fourth + 1)


def link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def netns_exists(name: str) -> bool:
    return Path("/run/netns", name).exists()


def ensure_bridge(bridge: str, gateway: str, network: str) -> None:
    if not link_exists(bridge):
        run(["ip", "link", "add", bridge, "type", "bridge"])
    have = run(["ip", "-o", "-4", "addr", "show", "dev", bridge]).stdout
    if f"{gateway}/" not in have:
        prefix = ipaddress.ip_network(network).prefixlen
        run(["ip", "addr", "add", f"{gateway}/{prefix}", "dev", bridge])
    run(["ip", "link", "set", bridge, "up"])


def remove_link(name: str) -> None:
    if link_exists(name):
        run(["ip", "link", "del", name])


def create_netns(netns: str, veth: str, address: str, bridge: str, network: str) -> None:
    """A namespace whose eth0 is wired to `bridge`, with `address` and a default route via
    the bridge's first address."""
    remove_netns(netns, veth)
    subnet = ipaddress.ip_network(network)
    run(["ip", "netns", "add", netns])
    run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns])
    run(["ip", "link", "set", veth, "master", bridge, "up"])
    inside = ["ip", "-n", netns]
    run([*inside, "addr", "add", f"{address}/{subnet.prefixlen}", "dev", "eth0"])
    run([*inside, "link", "set", "eth0", "up"])
    run([*inside, "link", "set", "lo", "up"])
    run([*inside, "route", "add", "default", "via", str(subnet.network_address + 1)])


def remove_netns(netns: str, veth: str) -> None:
    remove_link(veth)
    if netns_exists(netns):
        run(["ip", "netns", "del", netns])
