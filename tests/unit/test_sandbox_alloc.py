"""Named sandboxes: slot allocation against what the machine and other sandboxes use, the
machine readers on this machine's real `ip` and /proc, and --name/--dir resolution."""

from __future__ import annotations

import ipaddress
import json
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from gpurig.sandbox import alloc, fleet, net
from gpurig.sandbox.alloc import InUse, choose, parse_listening, parse_networks
from gpurig.sandbox.proc import SandboxError
from gpurig.sandbox.services import SERVICES, url
from gpurig.sandbox.state import State, load, locate, register, registered, save, unregister

NET = ipaddress.ip_network
LEGACY = InUse(  # the single sandbox of earlier gpurig: 10.77.0.0/16, fixed ports
    networks=(NET("10.77.0.0/16"), NET("10.79.0.0/24")),
    links=frozenset({"gpurig-br0"}),
    ports=frozenset({5000, 8080, 9418}),
)


def test_first_slot_on_an_empty_machine():
    a = choose("demo", InUse())
    assert (a.slot, a.bridge, a.podman_interface) == (0, "gr-demo", "gp-demo")
    assert (a.network, a.gateway, a.podman_subnet) == (
        "10.100.0.0/17",
        "10.100.0.1",
        "10.100.128.0/24",
    )
    assert a.ports == {"registry": 5000, "aptrepo": 8080, "git": 9418}
    assert not NET(a.network).overlaps(NET(a.podman_subnet))


def test_the_legacy_sandbox_and_its_ports_count_as_in_use():
    a = choose("test", LEGACY)
    assert a.slot == 1  # slot 0's ports are the legacy sandbox's
    assert a.ports == {"registry": 5001, "aptrepo": 8081, "git": 9419}
    assert not any(NET(a.network).overlaps(n) for n in LEGACY.networks)


def test_recorded_slots_and_overlapping_routes_are_skipped():
    used = InUse(networks=(NET("10.101.200.0/24"),), slots=frozenset({0}))
    assert choose("b", used).slot == 2


def test_no_free_slot_is_a_clear_error():
    with pytest.raises(SandboxError, match="no free sandbox slot"):
        choose("x", InUse(networks=(NET("10.0.0.0/8"),)))


def test_a_name_whose_bridge_exists_unrecorded_is_refused():
    with pytest.raises(SandboxError, match="gr-demo exists"):
        choose("demo", InUse(links=frozenset({"gr-demo"})))


@pytest.mark.parametrize("name", ["", "Demo", "-x", "a_b", "thirteen-char", "a/b"])
def test_bad_names_are_refused(name: str):
    with pytest.raises(SandboxError, match="expected 1-12 characters"):
        choose(name, InUse())


def test_link_names_fit_the_kernel_limit_at_the_extremes():
    a = alloc.slot_allocation("twelve-chars", alloc.SLOTS - 1)
    state = State()
    state.allocate(a)
    veth = fleet.record(state, 1000).veth
    login = fleet.login_record(state).veth
    assert max(len(a.bridge), len(a.podman_interface), len(veth), len(login)) <= 15
    assert NET(a.network).supernet(new_prefix=16) == alloc.block(alloc.SLOTS - 1)


def test_hosts_behind_the_login_node_share_no_address_with_the_bridge():
    """Their subnet lies in the bridge's (this machine routes it there, where nobody answers
    for it) but holds no fleet host (up to `--fleet 1000`), no login node, no gateway."""
    state = State()
    state.allocate(alloc.slot_allocation("demo", 3))
    private = net.private_network(state.network)
    assert private.subnet_of(NET(state.network))
    bridge = {state.gateway, net.login_address(state.network)}
    bridge |= {fleet.record(state, i).address for i in range(1, 1001)}
    assert len(bridge) == 1002
    assert not {a for a in bridge if ipaddress.ip_address(a) in private}
    behind = [fleet.behind_record(state, i) for i in range(1, 251)]
    addresses = {ipaddress.ip_address(r.address) for r in behind}
    assert len(addresses) == 250 and all(a in private for a in addresses)
    assert not addresses & {private.network_address + 1, private.broadcast_address}
    assert {r.via for r in behind} == {fleet.LOGIN} and not any(r.veth for r in behind)


def test_every_service_has_a_port_and_a_url():
    state = State()
    state.allocate(choose("u", InUse()))
    assert set(alloc.BASE_PORTS) == set(SERVICES)
    assert url(state, "registry") == "10.100.0.1:5000"
    assert url(state, "aptrepo") == "http://10.100.0.1:8080"
    assert url(state, "git") == "git://10.100.0.1:9418"


@pytest.mark.skipif(not shutil.which("ip"), reason="needs iproute2")
def test_networks_read_from_this_machines_ip_output():
    routes = subprocess.run(["ip", "-j", "-4", "route", "show", "table", "all"],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    addrs = subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True, text=True,
                           check=True).stdout  # fmt: skip
    found = parse_networks(routes, addrs)
    assert NET("127.0.0.0/8") in found
    assert all(n.prefixlen > 0 for n in found)  # the default route is not "everything in use"


def test_listening_ports_read_from_this_machines_proc():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        tables = [Path(p).read_text() for p in ("/proc/net/tcp", "/proc/net/tcp6")
                  if Path(p).exists()]  # fmt: skip
        assert port in parse_listening(tables)
    tables = [Path("/proc/net/tcp").read_text()]
    assert port not in parse_listening(tables)


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("GPURIG_SANDBOX", raising=False)
    monkeypatch.delenv("GPURIG_SANDBOX_DIR", raising=False)
    return tmp_path / "state" / "gpurig" / "sandboxes"


def test_locate_by_name_by_env_and_by_dir(index: Path, monkeypatch, tmp_path: Path):
    assert locate(None, None) == ("default", index / "default")
    assert locate("demo", None) == ("demo", index / "demo")
    monkeypatch.setenv("GPURIG_SANDBOX", "ci-7")
    assert locate(None, None) == ("ci-7", index / "ci-7")
    elsewhere = tmp_path / "my-box"
    assert locate(None, elsewhere) == ("my-box", elsewhere)
    assert locate("other", elsewhere) == ("other", elsewhere)
    save(elsewhere / "state.json", State(name="rec"))
    assert locate(None, elsewhere) == ("rec", elsewhere)  # the record wins over the dir name
    with pytest.raises(SandboxError, match="holds the sandbox 'rec', not 'other'"):
        locate("other", elsewhere)
    with pytest.raises(SandboxError, match="give --name"):
        locate(None, tmp_path / "Not_A_Name")


def test_register_links_a_dir_sandbox_once_and_unregister_removes_only_its_link(
    index: Path, tmp_path: Path
):
    named = index / "a"
    save(named / "state.json", State(name="a", slot=0))
    elsewhere = tmp_path / "b-dir"
    save(elsewhere / "state.json", State(name="b", slot=1))
    register("a", named)  # already in the index: nothing to do
    register("b", elsewhere)
    assert registered() == {"a": named.resolve(), "b": elsewhere.resolve()}
    with pytest.raises(SandboxError, match="already lives at"):
        register("a", elsewhere)
    unregister("a", named)  # a directory, not a link: left to `down`
    unregister("b", elsewhere)
    assert registered() == {"a": named.resolve()}
    assert load(named / "state.json").slot == 0


def test_records_of_a_newer_gpurig_still_load(tmp_path: Path):
    """A sandbox beside this one, made by a gpurig that records more (here a host field `coming`):
    choosing a slot reads its records, so unknown fields are left out, never a crash."""
    state = State(name="new", slot=2)
    state.hosts["login"] = fleet.login_record(State(name="new", slot=2, network="10.102.0.0/17"))
    save(tmp_path / "state.json", state)
    raw = json.loads((tmp_path / "state.json").read_text())
    raw["hosts"]["login"]["coming"] = "in a later gpurig"
    raw["coming"] = "later"
    (tmp_path / "state.json").write_text(json.dumps(raw))
    loaded = load(tmp_path / "state.json")
    assert (loaded.slot, loaded.hosts["login"]) == (2, state.hosts["login"])
