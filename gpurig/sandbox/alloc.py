"""Where a named sandbox lives on the machine: its bridge, subnets and service ports, chosen
so that sandboxes coexist (the demo's, two test runs', a benchmark's) and never take what
something else on the machine uses.

A sandbox takes one *slot*: slot k owns 10.(100+k).0.0/16 (the bridge's /17 for fleet hosts,
a /24 above it for the full hosts' Podman network) and one port per service (base + k). A slot
is free when no other sandbox records it and nothing on the machine overlaps it: no route or
address in its /16, no listener on its ports. The check and the bridge that claims the slot
happen under one machine-wide lock, so two `up`s never take the same slot."""

from __future__ import annotations

import fcntl
import ipaddress
import json
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpurig.sandbox.proc import SandboxError, run

NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,11}")  # 12 at most: "gr-" + name fits IFNAMSIZ (15)
FIRST_BLOCK, SLOTS = 100, 64
BASE_PORTS = {"registry": 5000, "aptrepo": 8080, "git": 9418}
LOCK = Path("/run/lock/gpurig-sandbox.lock")


@dataclass(frozen=True)
class Allocation:
    """What one sandbox owns on the machine; recorded in its state.json."""

    name: str
    slot: int
    bridge: str
    network: str  # the bridge's subnet, CIDR
    gateway: str
    podman_network: str
    podman_subnet: str
    podman_interface: str
    ports: dict[str, int]


@dataclass(frozen=True)
class InUse:
    """What the machine and the other sandboxes already use."""

    networks: tuple[ipaddress.IPv4Network, ...] = ()
    links: frozenset[str] = frozenset()
    ports: frozenset[int] = frozenset()
    slots: frozenset[int] = frozenset()  # recorded by other sandboxes


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise SandboxError(
            f"sandbox name {name!r}: expected 1-12 characters of a-z, 0-9 and '-', "
            "starting with a letter or digit"
        )
    return name


def block(slot: int) -> ipaddress.IPv4Network:
    return ipaddress.ip_network(f"10.{FIRST_BLOCK + slot}.0.0/16")


def slot_allocation(name: str, slot: int) -> Allocation:
    """The names, subnets and ports of `slot` for the sandbox `name` (no check)."""
    whole = block(slot)
    bridge_net = next(whole.subnets(new_prefix=17))
    podman = ipaddress.ip_network(f"{whole.network_address + 128 * 256}/24")
    return Allocation(
        name=name,
        slot=slot,
        bridge=f"gr-{name}",
        network=str(bridge_net),
        gateway=str(bridge_net.network_address + 1),
        podman_network=f"gpurig.{name}",
        podman_subnet=str(podman),
        podman_interface=f"gp-{name}",
        ports={service: base + slot for service, base in BASE_PORTS.items()},
    )


def choose(name: str, used: InUse) -> Allocation:
    """The lowest slot nothing uses; its link names must be free too."""
    check_name(name)
    for link in (f"gr-{name}", f"gp-{name}"):
        if link in used.links:
            raise SandboxError(
                f"network link {link} exists but no sandbox named {name!r} records it: another "
                "sandbox of that name runs on this machine (see `gpurig sandbox list`; as "
                "another user, under another state directory?); pick another --name"
            )
    for slot in range(SLOTS):
        if slot in used.slots:
            continue
        alloc = slot_allocation(name, slot)
        if any(block(slot).overlaps(net) for net in used.networks):
            continue
        if used.ports.intersection(alloc.ports.values()):
            continue
        return alloc
    raise SandboxError(f"no free sandbox slot: all {SLOTS} overlap a network or port in use")


def parse_networks(routes_json: str, addrs_json: str) -> list[ipaddress.IPv4Network]:
    """Every IPv4 destination of `ip -j route show table all` and every subnet of
    `ip -j addr`: what a new bridge's subnet must not overlap."""
    found = []
    for route in json.loads(routes_json or "[]"):
        dst = route.get("dst", "")
        if dst and dst != "default":
            found.append(ipaddress.ip_network(dst, strict=False))
    for link in json.loads(addrs_json or "[]"):
        for addr in link.get("addr_info", []):
            if addr.get("family") == "inet":
                found.append(ipaddress.ip_network(f"{addr['local']}/{addr['prefixlen']}", False))
    return [n for n in found if isinstance(n, ipaddress.IPv4Network) and n.prefixlen > 0]


def parse_listening(proc_net_tcp: Iterable[str]) -> set[int]:
    """Ports in state LISTEN (0A) in /proc/net/tcp and tcp6 text, on any address."""
    ports = set()
    for text in proc_net_tcp:
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A":
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def machine_in_use(other_slots: Iterable[int]) -> InUse:
    """Read the machine: routes, addresses, links, listening TCP ports."""
    routes = run(["ip", "-j", "-4", "route", "show", "table", "all"]).stdout
    addrs = run(["ip", "-j", "-4", "addr"]).stdout
    tcp = [p.read_text() for p in (Path("/proc/net/tcp"), Path("/proc/net/tcp6")) if p.exists()]
    return InUse(
        networks=tuple(parse_networks(routes, addrs)),
        links=frozenset(p.name for p in Path("/sys/class/net").iterdir()),
        ports=frozenset(parse_listening(tcp)),
        slots=frozenset(other_slots),
    )


@contextmanager
def machine_lock() -> Iterator[None]:
    """Held from choosing a slot until the bridge that claims it is up."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
