"""The sandbox network: one bridge per sandbox, and a network namespace with a veth per fleet
host. Names and subnets come from the sandbox's allocation (gpurig/sandbox/alloc.py).

Hosts behind the login node (`sandbox up --behind-login N`) live on a private network: a bridge
inside the login node's namespace, one veth from it into each such host's namespace. Their
subnet is the last /24 of the sandbox's bridge subnet, where no fleet host is numbered: this
machine's route for the bridge subnet sends their packets to the bridge, where nothing answers
for them (no route to host), so only the login node reaches them.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from gpurig.sandbox.proc import run

PRIVATE_BRIDGE = "private0"  # inside the login node's namespace: no clash with the machine's


def host_address(network: str, index: int) -> str:
    """Fleet host `index` (1-based) lives at .1.1, .1.2, ... of the bridge's subnet, 250
    per /24 (the gateway is .0.1)."""
    third, fourth = divmod(index - 1, 250)
    return str(ipaddress.ip_network(network).network_address + 256 * (third + 1) + fourth + 1)


def private_network(network: str) -> ipaddress.IPv4Network:
    """The subnet of the hosts behind the login node (see the module's docstring)."""
    return list(ipaddress.IPv4Network(network).subnets(new_prefix=24))[-1]


def login_address(network: str) -> str:
    """The login node's address on the sandbox bridge: .1 of the /24 below the private one,
    past any fleet host's number."""
    return str(private_network(network).network_address - 256 + 1)


def behind_address(network: str, index: int) -> str:
    """Host `index` (1-based) behind the login node: .2, .3, ... of the private subnet (the
    login node's own leg there is .1)."""
    return str(private_network(network).network_address + 1 + index)


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


def create_private_bridge(login_netns: str, network: str) -> None:
    """The login node's leg on the private network: a bridge inside its namespace (gone with
    it), holding .1 of the private subnet."""
    private = private_network(network)
    inside = ["ip", "-n", login_netns]
    run([*inside, "link", "add", PRIVATE_BRIDGE, "type", "bridge"])
    run([*inside, "addr", "add", f"{private.network_address + 1}/24", "dev", PRIVATE_BRIDGE])
    run([*inside, "link", "set", PRIVATE_BRIDGE, "up"])


def create_behind_netns(
    netns: str, address: str, login_netns: str, link: str, network: str
) -> None:
    """A namespace whose eth0 is wired to the login node's private bridge only: its veth
    peer (`link`) lives in the login node's namespace, so both ends go with either namespace."""
    remove_netns(netns, "")
    gateway = private_network(network).network_address + 1
    run(["ip", "netns", "add", netns])
    run(["ip", "-n", login_netns, "link", "add", link, "type", "veth",
         "peer", "name", "eth0", "netns", netns])  # fmt: skip
    run(["ip", "-n", login_netns, "link", "set", link, "master", PRIVATE_BRIDGE, "up"])
    inside = ["ip", "-n", netns]
    run([*inside, "addr", "add", f"{address}/24", "dev", "eth0"])
    run([*inside, "link", "set", "eth0", "up"])
    run([*inside, "link", "set", "lo", "up"])
    run([*inside, "route", "add", "default", "via", str(gateway)])


def remove_netns(netns: str, veth: str) -> None:
    """The namespace and, when this machine holds its other end (`veth`), that link."""
    if veth:
        remove_link(veth)
    if netns_exists(netns):
        run(["ip", "netns", "del", netns])
