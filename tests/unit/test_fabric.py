"""The fabric: the sysfs reader run for real (on this machine and, in a mount namespace of its
own, on a recorded sysfs tree), its strict parser, the fabric and NCCL checks and the fleet
view's fabric columns.

Verbatim sysfs dumps of RDMA hosts are rare in public; the recording here is prometheus/procfs'
test tree (tests/fixtures/fabric/procfs_sysfs-class_infiniband_net.ttar, its header says what
it is), whose values are in the formats Documentation/ABI/stable/sysfs-class-infiniband and the
kernel's drivers/infiniband/core/sysfs.c print. Where a test needs a reading the tree does not
hold (a port down, a counter over its threshold), it changes one recorded value to another
that the kernel's own format strings print (`1: DOWN`, `2: Polling`: state_show,
phys_state_show) and says so.
"""

from __future__ import annotations

import copy
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from gpurig.checks import fabric as fabric_checks
from gpurig.checks.all import CHECK_IDS
from gpurig.checks.judge import drift_reads, fleet_facts
from gpurig.facts.gpurig_fabric import Fabric
from gpurig.facts.round_trip import ROOT_PATH, HostState, Snapshot, Unreadable, read_key
from gpurig.read.fabric_parse import ib_hca_unmatched, parse_fabric, socket_ifname_unmatched
from gpurig.report import fleet
from gpurig.spec.model import normalise
from tests.unit.fact_values import framed, reader
from tests.unit.gpu_fixtures import recorded_output

RECORDING = Path(__file__).resolve().parent.parent / "fixtures" / "fabric"
TTAR = RECORDING / "procfs_sysfs-class_infiniband_net.ttar"
DIGEST = "sha256:" + "a" * 64


def ttar_files(text: str) -> dict[str, str]:
    """{path under sys/class: the file's bytes} from procfs' ttar archive (`Path:`, `Lines:
    N`, N lines; a last line ending in `EOF` has no newline); symbolic links (`SymlinkTo:`,
    into a devices tree the recording does not hold) are left out."""
    files: dict[str, str] = {}
    lines = text.splitlines()
    at = 0
    while at < len(lines):
        if lines[at].startswith("Path: ") and lines[at + 1].startswith("Lines: "):
            path = lines[at].removeprefix("Path: fixtures/sys/class/")
            count = int(lines[at + 1].removeprefix("Lines: "))
            body = lines[at + 2 : at + 2 + count]
            content = "\n".join(body) + "\n"
            if body and body[-1].endswith("EOF"):
                content = content[: -len("EOF\n")]
            files[path] = content
            at += 2 + count
        else:
            at += 1
    return files


def recorded_tree(top: Path) -> Path:
    """The recording unpacked as a sysfs `class` directory."""
    for path, content in ttar_files(recorded_output(TTAR)).items():
        target = top / "class" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return top / "class"


def run_fact(command: str, class_dir: Path | None = None) -> list[str]:
    """The fact's command as the host runs it (sh), over this machine's /sys, or with
    `class_dir` mounted on /sys/class in a mount namespace of its own."""
    argv = ["sh", "-c", command]
    if class_dir is not None:
        mount = f'mount --bind {class_dir} /sys/class && exec sh -c "$0"'
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    assert done.stderr == ""
    return done.stdout.splitlines()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The fact's own command run over the recorded tree, parsed by the fact."""
    if os.geteuid() != 0:
        pytest.fail("mounting the recorded sysfs tree over /sys/class needs root")
    fact = Fabric()
    tree = recorded_tree(tmp_path_factory.mktemp("sysfs"))
    return fact.process(run_fact(fact.command(), tree))


def test_the_reader_reads_the_recorded_tree_as_the_kernel_wrote_it(recorded: dict) -> None:
    hfi, mlx4, mlx5 = (recorded["hcas"][n] for n in ("hfi1_0", "mlx4_0", "mlx5_0"))
    assert set(recorded["hcas"]) == {"hfi1_0", "mlx4_0", "mlx5_0"}
    assert hfi["fw_ver"] == "1.27.0" and "hca_type" not in hfi  # hfi1 has no hca_type file
    assert hfi["board_id"].startswith("HPE 100Gb 1-port OP101 QSFP28")
    assert hfi["ports"]["1"] == {
        "state": "ACTIVE", "phys_state": "LinkUp", "rate": "100 Gb/sec (4X EDR)",
        "rate_gbps": 100.0, "link_layer": "InfiniBand",
        "counters": {c: 0 for c in fabric_checks.rules()["thresholds"]["fabric_counters"]},
    }  # fmt: skip
    assert (mlx4["hca_type"], mlx4["fw_ver"]) == ("MT4099", "2.31.5050")
    assert sorted(mlx4["ports"]) == ["1", "2"]
    assert {p["rate"] for p in mlx4["ports"].values()} == {"40 Gb/sec (4X QDR)"}
    assert mlx4["ports"]["2"]["link_layer"] == "InfiniBand"  # its file ends in an empty line
    assert (mlx5["hca_type"], mlx5["fw_ver"]) == ("MT4118", "14.28.2006")
    assert mlx5["ports"]["1"]["rate_gbps"] == 25.0
    assert recorded["interfaces"] == {"eth0": {"mtu": 1500, "operstate": "up"}}


def test_one_process_reads_every_file(tmp_path: Path) -> None:
    """The read's shell starts no process per file: the programs started (strace's successful
    execve) are the fact's shell, timeout and the bounded sh, however many files it reads."""
    tree = recorded_tree(tmp_path)
    log = tmp_path / "trace"
    command = Fabric().command()
    strace = f'strace -f -qq -e trace=execve -o {log} sh -c "$0"'
    mount = f"mount --bind {tree} /sys/class && exec {strace}"
    subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, command],
        env={"PATH": ROOT_PATH}, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    started = [
        line.split('"')[1].rsplit("/", 1)[-1]
        for line in log.read_text().splitlines()
        if "execve(" in line and line.rstrip().endswith("= 0")
    ]
    files = sum(1 for path in tree.rglob("*") if path.is_file())
    assert files > 100
    assert sorted(started) == ["sh", "sh", "timeout"], started


def test_this_machine_reads_and_parses() -> None:
    """Run for real here: /sys/class/net has at least the loopback interface."""
    fact = Fabric()
    reading = fact.process(run_fact(fact.command()))
    assert reading["interfaces"]["lo"]["mtu"] == int(Path("/sys/class/net/lo/mtu").read_text())


@pytest.mark.parametrize(
    "line",
    [
        "/sys/class/net/eth0/mtu",  # no tab: not a reading
        "/sys/class/net/eth 0/mtu\t1500",  # a name the kernel would not give
        "/sys/class/net/eth0\u202e/mtu\t1500",
        "/sys/class/net/averyveryverylongname/mtu\t1500",
        "/etc/shadow\troot:x",
        "/sys/class/infiniband/../ports/1/state\t4: ACTIVE",
        "/sys/class/infiniband/mlx5_0/fw_ver\t" + "9" * 300,
        # paths of another shape, read component by component
        "/sys/class/net/eth0/mtu/x\t1500", "/sys/class/net//mtu\t1500",
        "//sys/class/net/eth0/mtu\t1",
        "/sys/class/net/eth0/address\t00:00:00:00:00:00", "/sys/class/infiniband//fw_ver\t1",
        "/sys/class/infiniband/mlx5_0/ports/1234/state\t4: ACTIVE",
        "/sys/class/infiniband/mlx5_0/ports/\u0661/state\t4: ACTIVE",
        "/sys/class/infiniband/mlx5_0/ports//state\t4: ACTIVE",
        "/sys/class/infiniband/mlx5_0/ports/1/counters/nope\t0",
        "/sys/class/infiniband/mlx5_0/ports/1/counters\t0",
        "/sys/class/infiniband/mlx5_0/device/net\t",
        "/sys/class/infiniband/mlx5_0/device/net/a/b\t",
    ],
)  # fmt: skip
def test_odd_lines_are_refused(line: str) -> None:
    with pytest.raises(ValueError):
        parse_fabric(line)


GOOD = "/sys/class/infiniband/mlx5_1/ports/1/state\t4: ACTIVE\n/sys/class/net/eth1/mtu\t9000"


@pytest.mark.parametrize(
    ("line", "owner", "why"),
    [
        ("/sys/class/net/eth0/mtu\tnine thousand", ("interfaces", "eth0"), "mtu: MTU"),
        ("/sys/class/net/eth0/mtu\t\u0661\u0665", ("interfaces", "eth0"), "mtu: MTU"),
        ("/sys/class/net/eth0/operstate\tUP", ("interfaces", "eth0"), "operstate: operstate"),
        ("/sys/class/infiniband/mlx5_0/ports/1/state\tACTIVE", ("hcas", "mlx5_0"), "state:"),
        ("/sys/class/infiniband/mlx5_0/ports/1/rate\tfast", ("hcas", "mlx5_0"), "rate: port"),
        ("/sys/class/infiniband/mlx5_0/ports/1/link_layer\tCarrierPigeon", ("hcas", "mlx5_0"),
         "link_layer: link layer"),
        ("/sys/class/infiniband/mlx5_0/ports/1/counters/link_downed\t-1", ("hcas", "mlx5_0"),
         "link_downed: link_downed"),
        ("/sys/class/infiniband/mlx5_0/fw_ver\tv1;rm", ("hcas", "mlx5_0"), "fw_ver: fw_ver"),
    ],
)  # fmt: skip
def test_an_odd_value_is_refused_for_its_device_alone(
    line: str, owner: tuple[str, str], why: str
) -> None:
    """The value stays unknown, its device says why, and every other device is read."""
    reading = parse_fabric(f"{line}\n{GOOD}")
    [reason] = reading[owner[0]][owner[1]]["unreadable"]
    assert reason.startswith(why), reason
    assert reading["hcas"]["mlx5_1"]["ports"]["1"]["state"] == "ACTIVE"
    assert reading["interfaces"]["eth1"] == {"mtu": 9000}


def test_a_device_without_firmware_text_is_read_and_judged(tmp_path: Path) -> None:
    """The recorded tree with a soft-RoCE device added as the kernel shows one (rxe: fw_ver,
    hca_type and board_id each an empty line, as ib_device's attributes print where the driver
    has no string; one SDR lane, `2.5 Gb/sec (1X SDR)` by rate_show): every device is read
    through the fact's own command, and rxe0's port is judged."""
    tree = recorded_tree(tmp_path)
    rxe = tree / "infiniband" / "rxe0"
    (rxe / "ports" / "1" / "counters").mkdir(parents=True)
    for name in ("fw_ver", "hca_type", "board_id"):
        (rxe / name).write_text("\n")
    for name, value in (
        ("state", "4: ACTIVE"),
        ("phys_state", "5: LinkUp"),
        ("rate", "2.5 Gb/sec (1X SDR)"),
        ("link_layer", "Ethernet"),
    ):
        (rxe / "ports" / "1" / name).write_text(f"{value}\n")  # fmt: skip
    fact = Fabric()
    reading = fact.process(run_fact(fact.command(), tree))
    assert set(reading["hcas"]) == {"hfi1_0", "mlx4_0", "mlx5_0", "rxe0"}
    device = reading["hcas"]["rxe0"]
    assert (device["fw_ver"], device["hca_type"], device["board_id"]) == (None, None, None)
    assert "unreadable" not in device
    assert device["ports"]["1"]["rate_gbps"] == 2.5
    assert reading["hcas"]["mlx4_0"]["fw_ver"] == "2.31.5050"
    spec = {"fabric_expect": {"ports": {"rxe0": {"rate": 10}, "mlx4_0": {"rate": 40}}}}
    [slow] = check(spec, reading)
    assert (slow.id, slow.subject) == ("fabric.port_rate", "RDMA port rxe0/1")
    assert fabric_checks.fleet_pieces({}, lambda _cls: reading)["hca_firmware"]() == (
        "MT4099 2.31.5050, MT4118 14.28.2006"
    )


def test_a_counter_without_a_pma_is_none() -> None:
    """show_pma_counter prints `N/A (no PMA)` when the device answers no PMA query."""
    text = "/sys/class/infiniband/rxe0/ports/1/counters/symbol_error\tN/A (no PMA)"
    assert parse_fabric(text)["hcas"]["rxe0"]["ports"]["1"]["counters"] == {"symbol_error": None}


def test_an_odd_section_is_unreadable_in_the_one_read() -> None:
    """Through the host's one read, a refused reading is that fact's Unreadable, not an
    exception."""
    state = HostState()
    state.command([(Fabric, {})])
    part = framed("part", {"sysfs": ["/sys/class/net/a b/mtu\t1"]})
    value = state.process(framed("section", {"0": part}))[read_key(Fabric, {})]
    assert isinstance(value, Unreadable)
    assert "not a network interface name: 'a b'" in str(value)


def _with(reading: Mapping[str, Any], *path: str, value: Any) -> dict[str, Any]:
    """A deep copy of a reading with one value replaced."""
    changed = copy.deepcopy(dict(reading))
    at = changed
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    return changed


def _ids(spec: Mapping[str, Any], reading: Mapping[str, Any]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for finding in check(spec, reading):
        found.setdefault(finding.id, []).append(finding)
    return found


def test_the_recorded_host_as_declared_has_no_finding(recorded: dict) -> None:
    spec = {"fabric_expect": {"ports": {"mlx4_0": {"rate": 40}, "hfi1_0/1": {"rate": 100}},
                              "mtu": 1500, "interfaces": {"eth0": {}}}}  # fmt: skip
    assert _ids(spec, recorded) == {}


def test_a_port_missing_down_or_slow_is_found(recorded: dict) -> None:
    spec = {"fabric_expect": {"ports": {"*": {"rate": 40}, "mlx5_1/1": {}}}}
    # mlx5_0 runs 25 Gb/s (recorded); mlx4_0/2 changed to a down port in Polling, as
    # state_show and phys_state_show print one.
    port = ("hcas", "mlx4_0", "ports", "2")
    down = _with(recorded, *port, "state", value="DOWN")
    down = _with(down, *port, "phys_state", value="Polling")
    found = _ids(spec, down)
    assert [f.subject for f in found["fabric.port_missing"]] == ["RDMA port mlx5_1/1"]
    assert [f.subject for f in found["fabric.port_down"]] == ["RDMA port mlx4_0/2"]
    assert "physical state Polling" in found["fabric.port_down"][0].actual
    assert [f.subject for f in found["fabric.port_rate"]] == ["RDMA port mlx5_0/1"]
    assert "25 Gb/sec (1X EDR)" in found["fabric.port_rate"][0].actual
    assert all(f.severity == "error" for fs in found.values() for f in fs)


def test_no_rdma_port_at_all_is_one_finding() -> None:
    found = _ids({"fabric_expect": {"ports": {"*": {"rate": 400}}}}, Fabric().default())
    assert [f.message for f in found["fabric.port_missing"]] == ["no RDMA port at all on the host"]


def test_counters_at_their_threshold_are_named(recorded: dict) -> None:
    counters = ("hcas", "hfi1_0", "ports", "1", "counters")
    over = _with(recorded, *counters, "symbol_error", value=10)
    over = _with(over, *counters, "link_downed", value=3)
    findings = _ids({}, over)["fabric.port_errors"]
    assert len(findings) == 1 and findings[0].severity == "warn"
    assert findings[0].message == "RDMA port hfi1_0/1: symbol_error 10"
    assert _ids({}, _with(recorded, *counters, "symbol_error", value=9)) == {}


def test_an_mtu_other_than_declared_or_a_missing_interface_is_found(recorded: dict) -> None:
    spec = {"fabric_expect": {"mtu": 9000, "interfaces": {"eth0": {}, "ib0": {"mtu": 2044}}}}
    found = _ids(spec, recorded)
    assert [f.subject for f in found["fabric.mtu"]] == ["interface eth0"]
    assert found["fabric.mtu"][0].expected == "MTU 9000"
    assert found["fabric.mtu"][0].actual == "MTU 1500 (up)"
    assert [f.subject for f in found["fabric.interface_missing"]] == ["interface ib0"]


def test_an_rdma_devices_network_device_is_a_fabric_interface(recorded: dict) -> None:
    """A RoCE NIC's netdev (device/net/) is held to fabric_expect.mtu without being named."""
    roce = _with(recorded, "hcas", "mlx5_0", "netdevs", value=["eth0"])
    assert [f.subject for f in _ids({"fabric_expect": {"mtu": 9000}}, roce)["fabric.mtu"]] == [
        "interface eth0"
    ]


@pytest.mark.parametrize(
    ("value", "unmatched"),
    [
        ("eth", []),
        ("=eth0", []),
        ("=eth", ["eth"]),  # exact: eth0 is not eth
        ("ens,eth", ["ens"]),
        ("^docker,lo", []),
        ("^=docker0", []),
        ("^eth", ["eth"]),  # excludes every interface but lo
    ],
)
def test_socket_ifname_reads_as_nccl_does(value: str, unmatched: list[str]) -> None:
    assert socket_ifname_unmatched(value, ["eth0", "lo"])[1] == unmatched


@pytest.mark.parametrize(
    ("value", "unmatched"),
    [
        ("mlx5", []),
        ("=mlx5", ["mlx5"]),
        ("mlx5_0:2", ["mlx5_0:2"]),  # mlx5_0 has port 1 only
        ("=mlx4_0:1,mlx4_0:2", []),
        ("^mlx", []),  # hfi1_0 is left
        ("^mlx,hfi", ["mlx", "hfi"]),
        ("^=mlx4_0:1", []),
    ],
)
def test_ib_hca_reads_as_nccl_does(value: str, unmatched: list[str], recorded: dict) -> None:
    ports = {hca: sorted(d["ports"]) for hca, d in recorded["hcas"].items()}
    assert ib_hca_unmatched(value, ports)[1] == unmatched


def _container(network: str, **env: str) -> dict[str, Any]:
    return {"containers": {"train": {"image": f"r.example/t@{DIGEST}", "network": network,
                                     "env": env}}}  # fmt: skip


def test_a_containers_nccl_variables_are_held_to_the_host(recorded: dict) -> None:
    spec = _container("host", NCCL_SOCKET_IFNAME="=ens5", NCCL_IB_HCA="mlx5_0:1,mlx5_1:1")
    found = _ids(spec, recorded)
    (socket,) = found["nccl.socket_ifname"]
    assert socket.subject == "container train" and socket.actual == "interfaces: eth0"
    assert "selects nothing for ens5" in socket.message
    (hca,) = found["nccl.ib_hca"]
    assert "selects nothing for mlx5_1:1" in hca.message
    assert "mlx5_0:1" in hca.actual


def test_a_bridged_containers_interfaces_are_its_own(recorded: dict) -> None:
    assert _ids(_container("bridge", NCCL_SOCKET_IFNAME="=ens5"), recorded) == {}


def test_the_fleet_view_names_the_odd_host(recorded: dict) -> None:
    spec = normalise({"fabric_expect": {"interfaces": {"eth0": {}}}})
    odd = _with(recorded, "interfaces", "eth0", "mtu", value=9000)
    odd = _with(odd, "hcas", "mlx4_0", "fw_ver", value="2.42.5000")
    hosts = {}
    for name, reading in (("a", recorded), ("b", recorded), ("c", odd)):
        piece = fabric_checks.fleet_pieces(spec, reader({Fabric: reading}))
        hosts[name] = {key: value() for key, value in piece.items()}
    found = {f.id: f for f in fleet.findings(hosts)}
    assert set(found) == {"fleet.mixed_mtu", "fleet.mixed_hca_firmware"}
    assert found["fleet.mixed_mtu"].actual == "c: 9000"
    assert found["fleet.mixed_hca_firmware"].actual == ("c: MT4099 2.42.5000, MT4118 14.28.2006")
    assert hosts["a"]["port_rate"] == "100 Gb/sec (4X EDR), 25 Gb/sec (1X EDR), 40 Gb/sec (4X QDR)"
    assert hosts["a"]["hca"] == "MT4099, MT4118"


def test_the_fabric_is_one_read_of_drift_and_feeds_the_fleet(recorded: dict) -> None:
    spec = normalise({})
    reads = drift_reads(spec)
    assert [cls for cls, _ in reads].count(Fabric) == 1
    values = {read_key(cls, kwargs): cls().default() for cls, kwargs in reads}
    values[read_key(Fabric, {})] = recorded
    facts = fleet_facts(spec, Snapshot(values))
    assert (facts["hca"], facts["mtu"]) == ("MT4099, MT4118", None)  # no fabric interface named


# Specs the recorded tree, unchanged, does not meet: each fires its id (the findings catalogue's
# examples are these cases' reports: tests/finding_examples.py).
_PORTS = {"fabric_expect": {"ports": {"*": {"rate": 40}, "mlx5_1/1": {}}}}
_INTERFACES = {"fabric_expect": {"mtu": 9000, "interfaces": {"eth0": {}, "ib0": {"mtu": 2044}}}}
_NCCL = _container("host", NCCL_SOCKET_IFNAME="=ens5", NCCL_IB_HCA="mlx5_0:1,mlx5_1:1")
FIRES_ON_RECORDING: dict[str, dict[str, Any]] = {
    "fabric.port_missing": _PORTS,
    # Every recorded port is ACTIVE: one declared down (a port left unused) is not.
    "fabric.port_down": {"fabric_expect": {"ports": {"mlx5_0/1": {"state": "down"}}}},
    "fabric.port_rate": _PORTS,
    "fabric.mtu": _INTERFACES,
    "fabric.interface_missing": _INTERFACES,
    "nccl.socket_ifname": _NCCL,
    "nccl.ib_hca": _NCCL,
}
# Ids no recording shows, why, and the counters set by hand on the recorded reading that fire
# each (the findings catalogue gives the reason instead of an example).
NO_RECORDING: dict[str, tuple[str, dict[str, int]]] = {
    "fabric.port_errors": (
        "every error counter is 0",
        {"symbol_error": 10, "link_downed": 3},
    ),
}


def check(spec: Mapping[str, Any], reading: Mapping[str, Any]) -> list[Any]:
    """The fabric checks on one host's reading, in their order."""
    read = reader({Fabric: reading})
    return [finding for rule in fabric_checks.RULES for finding in rule(normalise(spec), read)]


def test_each_case_fires_on_the_unchanged_recording(recorded: dict) -> None:
    for check_id, spec in FIRES_ON_RECORDING.items():
        assert check_id in {f.id for f in check(spec, recorded)}, check_id


def test_every_fabric_id_has_its_case() -> None:
    assert set(FIRES_ON_RECORDING).isdisjoint(NO_RECORDING)
    assert set(FIRES_ON_RECORDING) | set(NO_RECORDING) == set(fabric_checks.IDS)
    assert set(fabric_checks.IDS) <= set(CHECK_IDS)


def test_each_case_without_a_recording_fires_on_hand_set_counters(recorded: dict) -> None:
    for check_id, (_why, counters) in NO_RECORDING.items():
        reading = recorded
        for name, value in counters.items():
            reading = _with(reading, "hcas", "hfi1_0", "ports", "1", "counters", name, value=value)
        assert check_id in {f.id for f in check({}, reading)}, check_id
