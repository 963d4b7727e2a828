"""Fabric checks the converge cannot fix: pure rules over the fabric fact (facts/gpurig_fabric.py:
RDMA ports, their counters and network devices, every interface's MTU), read through the
checks' reader (gpurig.checks.all). What `fabric_expect` declares (ports with their state and
rate, the fabric's MTU) is `error` when the host differs; error counters over the table's
thresholds are `warn` (they count since the driver loaded or the counters were cleared); a
declared container's NCCL_SOCKET_IFNAME and NCCL_IB_HCA must select what the host has. Ids,
severities, thresholds and sources: gpurig/data/checks.yaml. The fleet view's fabric columns
(`fleet_pieces`) come from the same reading.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gpurig.checks.rules import found, rules
from gpurig.facts.gpurig_fabric import Fabric
from gpurig.read.fabric_parse import ib_hca_unmatched, socket_ifname_unmatched
from gpurig.spec.finding import Finding

Read = Callable[..., Any]
Spec = Mapping[str, Any]
# The spec key this module reads: fabric_expect: {ports: {"mlx5_0/1" | "mlx5_0" | "*":
# {rate: 400, state: active}}, mtu: 9000, interfaces: {ens1f0: {mtu: 9000}}}.
EXPECT_KEY = "fabric_expect"
IDS = (
    "fabric.port_missing", "fabric.port_down", "fabric.port_rate", "fabric.port_errors",
    "fabric.interface_missing", "fabric.mtu", "nccl.socket_ifname", "nccl.ib_hca",
)  # fmt: skip
# A port in either state carries traffic (ACTIVE_DEFER: active, a state change deferred).
_ACTIVE = ("ACTIVE", "ACTIVE_DEFER")


def ports_of(fabric: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """{"HCA/PORT": port} for every RDMA port of the host."""
    return {
        f"{hca}/{number}": port
        for hca, device in sorted(fabric["hcas"].items())
        for number, port in sorted(device["ports"].items(), key=lambda item: int(item[0]))
    }


def _selected(key: str, ports: Mapping[str, Any]) -> list[str]:
    """The ports a `fabric_expect.ports` key names: all (`*`), an HCA's or one port."""
    if key == "*":
        return list(ports)
    return [name for name in ports if name == key or name.partition("/")[0] == key]


def _port_text(port: Mapping[str, Any]) -> str:
    return (
        f"state {port.get('state') or '?'}, physical state {port.get('phys_state') or '?'}, "
        f"rate {port.get('rate') or '?'}, link layer {port.get('link_layer') or '?'}"
    )


def _declared_ports(spec: Spec, read: Read) -> Iterator[Finding]:
    declared = (spec.get(EXPECT_KEY) or {}).get("ports") or {}
    fabric = read(Fabric)
    if not declared:
        return
    ports = ports_of(fabric)
    judged: set[str] = set()
    for key, want in declared.items():
        names = _selected(key, ports)
        if not names:
            have = ", ".join(ports) or "none"
            yield found(
                "fabric.port_missing",
                f"RDMA port {key}",
                f"no RDMA port {'at all' if key == '*' else key} on the host",
                f"RDMA port {key}",
                f"ports: {have}",
                "check the HCA is seated and its driver loaded (ls /sys/class/infiniband)",
            )
        for name in names:
            if name in judged:
                continue  # a port named by two keys is judged once, by the first
            judged.add(name)
            yield from _port(name, ports[name], want)


def _port(name: str, port: Mapping[str, Any], want: Mapping[str, Any]) -> Iterator[Finding]:
    state = want.get("state", "active")
    active = port.get("state") in _ACTIVE
    if (state == "active") != active:
        yield found(
            "fabric.port_down",
            f"RDMA port {name}",
            f"RDMA port {name} is {(port.get('state') or 'in no state').lower()}, {state} declared",
            f"state {state.upper()}",
            _port_text(port),
            "a port in Polling has no link partner (cable, switch port); Disabled or "
            "LinkErrorRecovery: read the switch's side and the port's error counters",
        )
        return  # a port that is not up has no rate to judge
    rate = want.get("rate")
    if rate and active and (port.get("rate_gbps") or 0) < rate:
        yield found(
            "fabric.port_rate",
            f"RDMA port {name}",
            f"RDMA port {name} runs at {port.get('rate') or 'no rate'}, {rate:g} Gb/s declared",
            f"at least {rate:g} Gb/sec",
            _port_text(port),
            "a link trained down to fewer lanes or a lower speed: reseat or replace the "
            "cable or transceiver, and compare the switch port's configuration",
        )


def _counters(_spec: Spec, read: Read) -> Iterator[Finding]:
    """Every port's error counters at or over their thresholds (the table's, as
    infiniband-diags' ibcheckerrs judged them), one finding per port."""
    limits: Mapping[str, int] = rules()["thresholds"]["fabric_counters"]
    for name, port in ports_of(read(Fabric)).items():
        counters = port.get("counters") or {}
        over = {c: counters[c] for c in limits if (counters.get(c) or 0) >= limits[c]}
        if not over:
            continue
        yield found(
            "fabric.port_errors",
            f"RDMA port {name}",
            f"RDMA port {name}: {', '.join(f'{c} {v}' for c, v in over.items())}",
            "; ".join(f"{c} < {limits[c]}" for c in over),
            "; ".join(f"{c} = {v}" for c, v in over.items()),
            "the counters count since the driver loaded or they were cleared: read them "
            "again after a job (perfquery, or the files under counters/) to see whether they "
            "still grow; link_downed and symbol_error that grow mean a bad cable, "
            "transceiver or switch port",
        )


def fabric_interfaces(spec: Spec, fabric: Mapping[str, Any]) -> dict[str, int | None]:
    """{interface: the MTU it must have (None: none declared)}: the interfaces
    `fabric_expect.interfaces` names and the host's RDMA devices' network devices."""
    expect = spec.get(EXPECT_KEY) or {}
    default = expect.get("mtu")
    names: dict[str, int | None] = {
        netdev: default for device in fabric["hcas"].values() for netdev in device["netdevs"]
    }
    for name, want in (expect.get("interfaces") or {}).items():
        names[name] = (want or {}).get("mtu", default)
    return names


def _mtu(spec: Spec, read: Read) -> Iterator[Finding]:
    expect = spec.get(EXPECT_KEY) or {}
    fabric = read(Fabric)
    if "mtu" not in expect and not expect.get("interfaces"):
        return
    interfaces = fabric["interfaces"]
    wanted = fabric_interfaces(spec, fabric)
    if not wanted:
        yield found(
            "fabric.interface_missing",
            "fabric interfaces",
            "the host has no fabric interface to hold to the declared MTU",
            "an RDMA device's network device, or fabric_expect.interfaces",
            f"interfaces: {', '.join(sorted(interfaces)) or 'none'}",
            "name the fabric's interfaces under fabric_expect.interfaces",
        )
    for name, mtu in sorted(wanted.items()):
        have = interfaces.get(name)
        if have is None:
            yield found(
                "fabric.interface_missing",
                f"interface {name}",
                f"interface {name} is not on the host",
                f"interface {name}",
                f"interfaces: {', '.join(sorted(interfaces)) or 'none'}",
                "check the NIC and its driver, or the name the host gives it (ip link)",
            )
        elif mtu is not None and have.get("mtu") != mtu:
            yield found(
                "fabric.mtu",
                f"interface {name}",
                f"interface {name} has MTU {have.get('mtu')}, {mtu} declared",
                f"MTU {mtu}",
                f"MTU {have.get('mtu')} ({have.get('operstate') or 'state unknown'})",
                f"set it (ip link set dev {name} mtu {mtu}) and make it last in the host's "
                "network configuration; every host and switch port of the fabric must agree",
            )


def _nccl_env(spec: Spec, read: Read) -> Iterator[Finding]:
    """Each declared container's NCCL_SOCKET_IFNAME (on the host's network only: a bridged
    container has interfaces of its own) and NCCL_IB_HCA, against what the host has."""
    fabric = read(Fabric)
    interfaces = sorted(fabric["interfaces"])
    ports = {hca: sorted(d["ports"]) for hca, d in sorted(fabric["hcas"].items())}
    for container, declared in sorted((spec.get("containers") or {}).items()):
        env = declared.get("env") or {}
        value = env.get("NCCL_SOCKET_IFNAME")
        if value and declared.get("network") == "host":
            exclude, unmatched = socket_ifname_unmatched(str(value), interfaces)
            if unmatched:
                yield _nccl(
                    "nccl.socket_ifname", container, value, exclude, unmatched,
                    f"interfaces: {', '.join(interfaces) or 'none'}",
                )  # fmt: skip
        value = env.get("NCCL_IB_HCA")
        if value:
            exclude, unmatched = ib_hca_unmatched(str(value), ports)
            if unmatched:
                have = ", ".join(f"{h}:{p}" for h, numbers in ports.items() for p in numbers)
                yield _nccl(
                    "nccl.ib_hca", container, value, exclude, unmatched,
                    f"RDMA ports: {have or 'none'}",
                )  # fmt: skip


def _nccl(
    check_id: str, container: str, value: str, exclude: bool, unmatched: list[str], have: str
) -> Finding:
    variable = "NCCL_SOCKET_IFNAME" if check_id == "nccl.socket_ifname" else "NCCL_IB_HCA"
    what = "leaves nothing" if exclude else f"selects nothing for {', '.join(unmatched)}"
    return found(
        check_id,
        f"container {container}",
        f"container {container}: {variable}={value} {what} on this host",
        f"{variable} selecting what the host has",
        have,
        f"name this host's own in the container's env ({variable}; NCCL takes a prefix, "
        "=NAME for an exact name, ^ to exclude, a comma list)",
    )


RULES = (_declared_ports, _counters, _mtu, _nccl_env)


def fleet_pieces(spec: Spec, read: Read) -> dict[str, Callable[[], Any]]:
    """The fleet view's fabric columns (gpurig/report/fleet.py): the fabric interfaces' MTUs,
    the RDMA ports' rates, the HCA models and their firmware, each the host's distinct
    values joined; None where the host has none (the column leaves it out)."""

    def joined(values: set[str]) -> str | None:
        return ", ".join(sorted(values)) or None

    def mtu() -> str | None:
        fabric = read(Fabric)
        interfaces = fabric["interfaces"]
        return joined({
            str(interfaces[name]["mtu"])
            for name in fabric_interfaces(spec, fabric)
            if "mtu" in interfaces.get(name, {})
        })  # fmt: skip

    def rates() -> str | None:
        return joined({p["rate"] for p in ports_of(read(Fabric)).values() if p.get("rate")})

    def devices(*keys: str) -> str | None:
        hcas = read(Fabric)["hcas"].values()
        return joined({" ".join(d[k] for k in keys) for d in hcas if all(d.get(k) for k in keys)})

    return {
        "mtu": mtu,
        "port_rate": rates,
        "hca": lambda: devices("hca_type"),
        "hca_firmware": lambda: devices("hca_type", "fw_ver"),
    }
