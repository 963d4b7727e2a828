"""The fabric's sysfs reading: RDMA devices (InfiniBand, RoCE) with their ports, port error
counters and network devices, and every network interface's MTU and state.

The reader (facts/gpurig_fabric.py) prints one line per file it read, `PATH<TAB>FIRST LINE`,
and one line `PATH<TAB>` per network device under an RDMA device. The files and their formats
are the kernel's (Documentation/ABI/stable/sysfs-class-infiniband,
drivers/infiniband/core/sysfs.c, Documentation/ABI/testing/sysfs-class-net). Host output is
untrusted: a path of another shape, or a device or interface name outside the kernel's own
spelling, refuses the whole reading (ValueError); a value of another format is refused for
its device or interface alone (its `unreadable` list says which and why, the value stays
unknown), so one odd device never hides the others. An empty firmware, type or board id is
what the kernel prints where the driver has none (soft-RoCE `rxe`, some virtual functions):
unknown (None), not odd.
"""

from __future__ import annotations

import re
from typing import Any

from gpurig.spec.pattern import digits, lazy

# The counters a port's health is judged by (the error counters of the IB PortCounters
# attribute the kernel exposes under ports/N/counters/).
COUNTERS = (
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
    "local_link_integrity_errors", "excessive_buffer_overrun_errors",
)  # fmt: skip
DEVICE_FILES = ("fw_ver", "hca_type", "board_id")
PORT_FILES = ("state", "phys_state", "rate", "link_layer")
NET_FILES = ("mtu", "operstate")

# An RDMA device's name (IB_DEVICE_NAME_MAX is 64: mlx5_0, irdma0, hfi1_0, rxe_eth0) and a
# network interface's (IFNAMSIZ less the NUL: 15 bytes; the kernel refuses '/', ':' and white
# space, gpurig keeps to the characters real names use).
HCA_NAME = lazy(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_IFNAME_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_IFNAME_REST = _IFNAME_FIRST | frozenset(".@+-")
_SYS_NET = ["", "sys", "class", "net"]
_SYS_IB = ["", "sys", "class", "infiniband"]


def _ifname(name: str) -> bool:
    """A network interface's name as gpurig accepts one, by sets rather than a pattern: every
    node has interfaces, and a pattern compiled at each contract's start costs more."""
    return 0 < len(name) <= 15 and name[0] in _IFNAME_FIRST and _IFNAME_REST.issuperset(name)


def _path(path: str) -> tuple[str, dict[str, str]] | None:
    """(kind, its parts) of a path the reader prints: an interface's file, an RDMA device's,
    a port's, a port counter's, or a network device under an RDMA device; None for any other.
    By its components: every node reads its interfaces, an RDMA device may have none."""
    parts = path.split("/")
    if parts[:4] == _SYS_NET and len(parts) == 6 and parts[4] and parts[5] in NET_FILES:
        return "net", {"ifname": parts[4], "file": parts[5]}
    if parts[:4] != _SYS_IB or len(parts) < 6 or not parts[4]:
        return None
    hca, rest = parts[4], parts[5:]
    if len(rest) == 1 and rest[0] in DEVICE_FILES:
        return "device", {"hca": hca, "file": rest[0]}
    if len(rest) == 3 and rest[:2] == ["device", "net"] and rest[2]:
        return "netdev", {"hca": hca, "ifname": rest[2]}
    if len(rest) < 3 or rest[0] != "ports" or not digits(rest[1], 3):
        return None
    if len(rest) == 3 and rest[2] in PORT_FILES:
        return "port", {"hca": hca, "port": rest[1], "file": rest[2]}
    if len(rest) == 4 and rest[2] == "counters" and rest[3] in COUNTERS:
        return "counter", {"hca": hca, "port": rest[1], "file": rest[3]}
    return None


# `N: NAME` (state_show, phys_state_show), `R Gb/sec (WX SPEED)` (rate_show; the speed is
# absent for SDR), a PMA counter or the kernel's `N/A (no PMA)`.
_STATE = lazy(r"[0-9]{1,2}: (?P<name>[A-Z_]+)")
_PHYS_STATE = lazy(r"[0-9]{1,2}: (?P<name>[A-Za-z <>]{1,40})")
_RATE = lazy(r"(?P<gbps>[0-9]{1,5}(?:\.5)?) Gb/sec \((?P<width>[0-9]{1,2})X(?: [A-Z0-9]{2,6})?\)")
_NO_PMA = "N/A (no PMA)"
_COUNT = lazy(r"[0-9]{1,20}")
_LINK_LAYERS = ("InfiniBand", "Ethernet", "Unknown")
# operstate_show: RFC 2863's operational states (net/core/net-sysfs.c).
_OPERSTATES = ("unknown", "notpresent", "down", "lowerlayerdown", "testing", "dormant", "up")
# What a firmware version, HCA type or board id may hold (mlx5's fw_ver `28.39.1002`, hca_type
# `MT4123`, board_id `MT_0000000223`; hfi1's board_id is a sentence).
_TEXT = lazy(r"[A-Za-z0-9 _.,:()+/-]{1,128}")
_VALUE_MAX = 256


def _interface(name: str) -> str:
    if not _ifname(name):
        raise ValueError(f"not a network interface name: {name[:40]!r}")
    return name


def _name(pattern: re.Pattern[str], text: str, what: str) -> str:
    if not pattern.fullmatch(text):
        raise ValueError(f"not a {what} name: {text[:40]!r}")
    return text


def _value(pattern: re.Pattern[str], text: str, what: str) -> re.Match[str]:
    match = pattern.fullmatch(text)
    if match is None:
        raise ValueError(f"{what}: unexpected value {text[:60]!r}")
    return match


def _port(device: dict[str, Any], port: str) -> dict[str, Any]:
    return device["ports"].setdefault(str(int(port)), {"counters": {}})


def _port_file(entry: dict[str, Any], file: str, value: str) -> None:
    if file == "state":
        entry["state"] = _value(_STATE, value, "port state")["name"]
    elif file == "phys_state":
        entry["phys_state"] = _value(_PHYS_STATE, value, "port physical state")["name"]
    elif file == "rate":
        entry["rate"] = value
        entry["rate_gbps"] = float(_value(_RATE, value, "port rate")["gbps"])
    elif value in _LINK_LAYERS:
        entry["link_layer"] = value
    else:
        raise ValueError(f"link layer: unexpected value {value[:60]!r}")


def _reading(entry: dict[str, Any], kind: str, groups: dict[str, str], value: str) -> None:
    """One file's value into its device's (`entry`: an RDMA device or an interface)."""
    file = groups.get("file")
    if kind == "net":
        if file == "mtu":
            if not digits(value, 20):
                raise ValueError(f"MTU: unexpected value {value[:60]!r}")
            entry["mtu"] = int(value)
        elif value in _OPERSTATES:
            entry["operstate"] = value
        else:
            raise ValueError(f"operstate: unexpected value {value[:60]!r}")
    elif kind == "netdev":
        entry["netdevs"].append(_interface(groups["ifname"]))
    elif kind == "device":
        entry[file] = _value(_TEXT, value, file)[0] if value else None
    elif kind == "port":
        _port_file(_port(entry, groups["port"]), file, value)
    else:
        counters = _port(entry, groups["port"])["counters"]
        counters[file] = None if value == _NO_PMA else int(_value(_COUNT, value, file)[0])


def parse_fabric(text: str) -> dict[str, Any]:
    """The reader's lines as {"hcas": {name: {"fw_ver", "hca_type", "board_id", "netdevs",
    "ports": {"1": {"state", "phys_state", "rate", "rate_gbps", "link_layer", "counters"}}}},
    "interfaces": {name: {"mtu", "operstate"}}}; a counter without a PMA is None, an empty
    device attribute None; a device or interface with a value of another format has
    "unreadable": ["FILE: why", ...]."""
    hcas: dict[str, Any] = {}
    interfaces: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        path, tab, value = line.partition("\t")
        if not tab or len(value) > _VALUE_MAX:
            raise ValueError(f"not a sysfs reading: {line[:80]!r}")
        found = _path(path)
        if found is None:
            raise ValueError(f"not a fabric file: {path[:80]!r}")
        kind, groups = found
        if kind == "net":
            entry = interfaces.setdefault(_interface(groups["ifname"]), {})
        else:
            entry = hcas.setdefault(
                _name(HCA_NAME, groups["hca"], "RDMA device"), {"ports": {}, "netdevs": []}
            )
        try:
            _reading(entry, kind, groups, value)
        except ValueError as exc:  # this device's or interface's alone
            entry.setdefault("unreadable", []).append(f"{path.rsplit('/', 1)[-1]}: {exc}")
    for device in hcas.values():
        device["netdevs"].sort()
    return {"hcas": hcas, "interfaces": interfaces}


def _prefixes(value: str) -> tuple[bool, bool, list[str]]:
    """NCCL's list syntax: (exclude, exact, items): a leading `^` excludes, then a leading `=`
    matches whole names, the rest is a comma list (NCCL's environment variables page)."""
    exclude = value.startswith("^")
    value = value.removeprefix("^")
    exact = value.startswith("=")
    value = value.removeprefix("=")
    return exclude, exact, [item.strip() for item in value.split(",") if item.strip()]


def socket_ifname_unmatched(value: str, interfaces: list[str]) -> tuple[bool, list[str]]:
    """NCCL_SOCKET_IFNAME against the host's interfaces: (exclude, the entries that select
    no interface). An inclusion list names each entry's unmatched prefix or name; an
    exclusion list is unmatched (all its entries) only when it leaves no interface but `lo`."""
    exclude, exact, items = _prefixes(value)

    def matches(item: str, name: str) -> bool:
        return name == item if exact else name.startswith(item)

    if exclude:
        left = [n for n in interfaces if n != "lo" and not any(matches(i, n) for i in items)]
        return True, [] if left else items
    return False, [i for i in items if not any(matches(i, n) for n in interfaces)]


def ib_hca_unmatched(value: str, ports: dict[str, list[str]]) -> tuple[bool, list[str]]:
    """NCCL_IB_HCA against the host's RDMA devices and their ports ({hca: [port, ...]}):
    (exclude, the entries that select nothing). Entries are `NAME` or `NAME:PORT`, prefixes
    unless the list starts with `=` (after any `^`)."""
    exclude, exact, items = _prefixes(value)

    def hits(item: str, hca: str, port: str) -> bool:
        name, _, wanted = item.partition(":")
        named = hca == name if exact else hca.startswith(name)
        return named and (not wanted or wanted == port)

    pairs = [(hca, port) for hca, found in ports.items() for port in found]
    if exclude:
        left = [pair for pair in pairs if not any(hits(i, *pair) for i in items)]
        return True, [] if left else items
    return False, [i for i in items if not any(hits(i, *pair) for pair in pairs)]
