"""The fabric over real SSH: three fleet hosts given fabric interfaces of their own (a veth pair
inside each host's network namespace) with different names and MTUs, checked by `gpurig
drift`: the MTU finding on the odd host, the NCCL_SOCKET_IFNAME finding where the declared
container names an interface the host does not have, and the fleet view naming the odd MTU."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import Sandbox, gpurig, write_inventory

# Each host's fabric interface: its name and MTU (fleet-003 is the odd one of a 9000 fabric).
FABRIC = {"fleet-001": ("ens5", 9000), "fleet-002": ("enp1s0", 9000), "fleet-003": ("ens5", 1500)}


def _ip(netns: str, *args: str) -> None:
    subprocess.run(["ip", "-n", netns, *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def fabric_hosts(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The hosts' fabric interfaces added, and an inventory declaring a 9000-byte fabric and a
    container whose NCCL_SOCKET_IFNAME names ens5; the interfaces removed afterwards."""
    hosts = sandbox.state.hosts
    specs = {}
    for name, (interface, mtu) in FABRIC.items():
        _ip(hosts[name].netns, "link", "add", interface, "mtu", str(mtu), "type", "veth",
            "peer", "name", f"{interface}-peer", "mtu", str(mtu))  # fmt: skip
        for end in (interface, f"{interface}-peer"):  # a veth is up once both ends are
            _ip(hosts[name].netns, "link", "set", end, "up")
        specs[name] = {
            "fabric_expect": {"mtu": 9000, "interfaces": {interface: {}}},
            "containers": {"train": {
                "image": sandbox.state.images["train"], "network": "host",
                "env": {"NCCL_SOCKET_IFNAME": "=ens5"},
            }},
        }  # fmt: skip
    path = tmp_path_factory.mktemp("fabric") / "inventory.yaml"
    yield write_inventory(sandbox, path, specs)
    for name, (interface, _) in FABRIC.items():
        _ip(hosts[name].netns, "link", "del", interface)


def test_drift_finds_the_odd_mtu_the_missing_interface_and_the_fleets_odd_host(
    fabric_hosts: Path,
) -> None:
    limits = [arg for name in FABRIC for arg in ("--limit", name)]
    proc = gpurig("drift", str(fabric_hosts), *limits, "--format", "json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 1  # the spec's containers are not there either
    by_host = {h["name"]: {f["id"]: f for f in h["findings"]} for h in report["hosts"]}
    assert all(h["reachable"] for h in report["hosts"])
    odd = by_host["fleet-003"]["fabric.mtu"]
    assert (odd["expected"], odd["actual"]) == ("MTU 9000", "MTU 1500 (up)")
    assert not any("fabric.mtu" in by_host[n] for n in ("fleet-001", "fleet-002"))
    nccl = by_host["fleet-002"]["nccl.socket_ifname"]
    assert "selects nothing for ens5" in nccl["message"] and "enp1s0" in nccl["actual"]
    assert not any("nccl.socket_ifname" in by_host[n] for n in ("fleet-001", "fleet-003"))
    assert not any("fabric.interface_missing" in found for found in by_host.values())
    mixed = {f["id"]: f for f in report["fleet"]["findings"]}["fleet.mixed_mtu"]
    assert (mixed["expected"], mixed["actual"]) == ("9000 (on 2 hosts)", "fleet-003: 1500")
