"""Onboard's pure pieces (OS rule, report, inventory edit, checks on fact values in their real
shapes) and its refusals that need no host: nothing listening, a login refused, an invalid
edit."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gpurig.checks.judge import judge
from gpurig.cli.main import main
from gpurig.facts.gpurig_container import CpuQuota
from gpurig.facts.gpurig_fabric import Fabric
from gpurig.facts.gpurig_node import (
    CgroupLeaks,
    CgroupMemory,
    DiskSpace,
    EngineSocket,
    EngineVersions,
    HostMemory,
    Login,
    LoginShell,
)
from gpurig.facts.gpurig_packages import OsRelease
from gpurig.facts.gpurig_reach import AptSources
from gpurig.facts.round_trip import Recorder, Unreadable, required_reads
from gpurig.onboard.onboard import (
    Check,
    OnboardError,
    edit_inventory,
    host_checks,
    os_problem,
    os_tested,
    preflight_reads,
    record,
    render_checks,
    split_address,
)
from gpurig.spec.inventory import load_inventory, load_inventory_text
from gpurig.spec.key_paths import home_relative
from gpurig.spec.model import normalise
from tests.unit.fact_values import gpu_values, reader
from tests.unit.ssh_server import generate_key, ssh_server

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories" / "examples" / "example.yaml"
PROFILES = ROOT / "inventories" / "examples" / "profiles.yaml"
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB6w8YgX1fT9tJmA1q0N3s0p2Yk6mVn2r8xqB5b3QdJc"
SSH = {"port": 22, "user": "root", "key": "~/.ssh/k", "host_key": HOST_KEY}


@pytest.mark.parametrize(
    ("os_id", "version", "supported"),
    [("debian", "11", True), ("debian", "13", True), ("debian", "10", False),
     ("ubuntu", "20.04", True), ("ubuntu", "24.04", True), ("ubuntu", "18.04", False),
     ("ubuntu", "24.10", False), ("debian", None, False), ("centos", "9", False),
     (None, None, False)],
)  # fmt: skip
def test_os_rule(os_id: str | None, version: str | None, supported: bool) -> None:
    assert (os_problem(os_id, version) is None) is supported


@pytest.mark.parametrize(
    ("os_id", "version", "pretty", "status"),
    [("debian", "12", "Debian GNU/Linux 12 (bookworm)", "ok"),
     ("debian", "13", "Debian GNU/Linux 13 (trixie)", "ok"),
     ("ubuntu", "22.04", "Ubuntu 22.04.5 LTS", "warn")],
)  # fmt: skip
def test_an_accepted_but_untested_release_is_said(
    os_id: str, version: str, pretty: str, status: str
) -> None:
    found = checks({}, facts(OsRelease={"os_id": os_id, "os_version": version,
                                        "os_pretty": pretty}))["os"]  # fmt: skip
    assert found.status == status and found.detail.startswith(pretty)
    assert ("accepted but untested" in found.detail) is (status == "warn")
    assert (os_tested(os_id, version) is None) is (status == "warn")
    if version == "13":
        assert "converged and checked on sandbox hosts" in found.detail


# What each release runs on the node itself: nothing (its python3 below the node agent's
# 3.9), the node agent only (below the full install's 3.11), or both (None).
NO_AGENT = "older than the 3.9 gpurig's node agent needs"
AGENT_ONLY = "the node agent runs there (drift --local"


@pytest.mark.parametrize(
    ("os_id", "version", "pretty", "python", "said"),
    [("debian", "11", "Debian GNU/Linux 11 (bullseye)", "3.9", AGENT_ONLY),
     ("ubuntu", "20.04", "Ubuntu 20.04.6 LTS", "3.8", NO_AGENT),
     ("ubuntu", "22.04", "Ubuntu 22.04.5 LTS", "3.10", AGENT_ONLY),
     ("debian", "12", "Debian GNU/Linux 12 (bookworm)", None, None),
     ("debian", "13", "Debian GNU/Linux 13 (trixie)", None, None),
     ("ubuntu", "24.04", "Ubuntu 24.04.1 LTS", None, None)],
)  # fmt: skip
def test_what_a_release_runs_on_the_node_is_named(
    os_id: str, version: str, pretty: str, python: str | None, said: str | None
) -> None:
    found = checks({}, facts(OsRelease={"os_id": os_id, "os_version": version,
                                        "os_pretty": pretty}))["os"]  # fmt: skip
    assert (f"{pretty}'s python3 is {python}" in found.detail) is (python is not None)
    assert said is None or said in found.detail
    assert (NO_AGENT in found.detail) is (said == NO_AGENT)
    if python:
        assert found.status == "warn" and "up --local" in found.detail
    if said == AGENT_ONLY:
        assert "up --local needs the full install's 3.11" in found.detail


def test_split_address() -> None:
    assert split_address("ubuntu@203.0.113.7", None) == ("ubuntu", "203.0.113.7")
    assert split_address("203.0.113.7", "root") == ("root", "203.0.113.7")
    with pytest.raises(OnboardError, match=r"^preflight: .*--user says root"):
        split_address("ubuntu@203.0.113.7", "root")


def test_report_is_one_aligned_line_per_check() -> None:
    text = render_checks([Check("os", "ok", "Debian 12"), Check("root", "FAIL", "not root")])
    assert text == "ok    os    Debian 12\nFAIL  root  not root\n"


def _lines_in_order(old: str, new: str) -> bool:
    rest = iter(new.splitlines())
    return all(line in rest for line in old.splitlines())


def test_edit_keeps_comments_order_and_quoting_and_validates() -> None:
    text = EXAMPLE.read_text()
    edited = edit_inventory(text, "a100-3", "203.0.113.7", SSH, ["docker-gpu", "skyrl"])
    assert _lines_in_order(text, edited)  # every line kept, in its place
    assert edited.endswith(
        "  a100-3:\n    address: 203.0.113.7\n    ssh:\n      port: 22\n      user: root\n"
        f'      key: ~/.ssh/k\n      host_key: "{HOST_KEY}"\n    groups: [docker-gpu, skyrl]\n'
    )
    host = load_inventory_text(edited, "fleet.yaml").hosts[-1]
    assert (host.name, host.ssh.host_key, host.groups) == (
        "a100-3",
        HOST_KEY,
        ("docker-gpu", "skyrl"),
    )
    assert host.spec["engine"] == "docker"


def test_edit_keeps_a_block_list_style_and_updates_an_entry_in_place() -> None:
    text = yaml.safe_dump(
        {"version": 1, "groups": {"g": {"spec": {"packages": ["tmux"]}}},
         "hosts": {"a": {"address": "10.0.0.1", "groups": ["g"], "spec": {"gpu": "absent"}}}},
        sort_keys=False,
    )  # fmt: skip
    edited = edit_inventory(text, "a", "10.0.0.2", {"port": 2222, "host_key": HOST_KEY}, [])
    assert _lines_in_order(text.replace("10.0.0.1", "10.0.0.2"), edited)  # safe_dump's style
    data = yaml.safe_load(edited)
    assert data["hosts"]["a"] == {
        "address": "10.0.0.2",
        "groups": ["g"],  # kept: none given
        "spec": {"gpu": "absent"},
        "ssh": {"port": 2222, "host_key": HOST_KEY},
    }


@pytest.mark.parametrize(
    ("group", "engine", "free"),
    [("docker-gpu", "docker", "50g"), ("docker-cpu", "docker", "10g"),
     ("podman-node", "podman", "50g"), ("pod", "none", "50g")],
)  # fmt: skip
def test_profiles_start_an_inventory_whose_hosts_grow_as_a_block(
    group: str, engine: str, free: str
) -> None:
    edited = edit_inventory(PROFILES.read_text(), "new-1", "203.0.113.9", SSH, [group])
    assert "\nhosts:\n  new-1:\n    address: 203.0.113.9\n" in edited
    [host] = load_inventory_text(edited, "fleet.yaml").hosts
    assert host.spec["engine"] == engine
    assert host.spec["checks"] == {"disk_free_min": free, "inodes_free_min_pct": 10}


def test_the_cpu_profile_asks_for_no_gpu_and_no_nvidia_source() -> None:
    edited = edit_inventory(PROFILES.read_text(), "cpu-1", "203.0.113.9", SSH, ["docker-cpu"])
    [host] = load_inventory_text(edited, "fleet.yaml").hosts
    assert host.spec["gpu"] == "absent" and not host.spec.get("nvidia_toolkit")


def test_record_restores_the_file_when_the_edit_does_not_validate(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(EXAMPLE.read_bytes())
    path.chmod(0o600)
    original = path.read_bytes()
    with pytest.raises(OnboardError, match=r"^record: .*restored"):
        record(path, original, original.decode() + "bogus: 1\n")
    assert path.read_bytes() == original
    edited = edit_inventory(original.decode(), "a100-3", "203.0.113.7", SSH, [])
    record(path, original, edited)
    assert path.read_text() == edited and path.stat().st_mode & 0o777 == 0o600
    assert "a100-3" in [h.name for h in load_inventory([path]).hosts]


GiB = 1024**3


def facts(**changes: Any) -> dict[type, Any]:
    """A root login on Debian 12 with room, no GPU, no engine, no limits: each fact's value."""
    values: dict[type, Any] = {
        OsRelease: {"kernel": "6.1.0-25-amd64", "os_id": "debian", "os_version": "12",
                    "os_pretty": "Debian GNU/Linux 12"},
        Login: {"uid": 0, "user": "root", "sudo": None},
        DiskSpace: [{"path": "/", "exists": True, "mount": "/", "free_bytes": 200 * GiB,
                     "inodes_total": 1000, "inodes_free": 900}],
        EngineVersions: {"docker": None, "podman": None},
        CgroupMemory: {"limit": None, "oom_kill": 0},
        CpuQuota: {"nproc": 16, "cpus": None},
        **{fact: fact().default()
           for fact in (CgroupLeaks, LoginShell, HostMemory, EngineSocket, Fabric)},
        **gpu_values(nvidia_smi=False),
    }  # fmt: skip
    for fact, change in changes.items():
        fact_class = {f.__name__: f for f in values}[fact]
        value = values[fact_class]
        values[fact_class] = {**value, **change} if isinstance(change, dict) else change
    return values


def new_host(spec: dict[str, Any]) -> Any:
    text = edit_inventory(PROFILES.read_text(), "new", "203.0.113.9", SSH, [])
    [host] = load_inventory_text(text, "fleet.yaml").hosts
    return host._replace(spec=normalise(spec))  # as a loaded host's is


def checks(spec: dict[str, Any], values: dict[type, Any]) -> dict[str, Check]:
    return {c.name: c for c in host_checks(new_host(spec), reader(values))}


def test_checks_pass_on_a_good_host() -> None:
    result = checks({"gpu": "absent", "engine": "docker"}, facts())
    assert {c.status for c in result.values()} == {"ok"}
    assert result["disk"].detail == "/ has 200 GiB free, 90% of inodes free"


def test_checks_fail_each_thing_wrong() -> None:
    old_os = checks({}, facts(OsRelease={"os_id": "ubuntu", "os_version": "18.04"}))
    assert old_os["os"].status == "FAIL" and "18.04" in old_os["os"].detail
    plain = checks({}, facts(Login={"uid": 1000, "user": "plain", "sudo": False}))
    assert plain["root"].status == "FAIL" and "sudo" in plain["root"].detail
    sudoer = checks({}, facts(Login={"uid": 1000, "user": "ubuntu", "sudo": True}))
    assert sudoer["root"].status == "ok"
    full = facts(DiskSpace=[{**facts()[DiskSpace][0], "free_bytes": 10 * GiB}])
    assert checks({"checks": {"disk_free_min": "50g"}}, full)["disk"].status == "FAIL"
    assert checks({"checks": {"disk_free_min": "5g"}}, full)["disk"].status == "ok"
    no_gpu = checks({"gpu": "required"}, facts())["gpu"]
    assert no_gpu.status == "FAIL" and "GPU" in no_gpu.detail
    assert checks({"gpu": "auto"}, facts())["gpu"].status == "warn"
    pod = facts(CgroupMemory={"limit": 64 * GiB}, CpuQuota={"cpus": 8.0})
    limited = checks({"engine": "docker"}, pod)["cgroup"]
    assert limited.status == "warn" and "memory 64 GiB, 8 CPUs" in limited.detail
    assert checks({"engine": "none"}, pod)["cgroup"].status == "ok"


# A 12 GiB tmpfs /tmp (Debian 13 sizes /tmp to half of RAM) beside a roomy root filesystem.
SMALL_TMP = [
    facts()[DiskSpace][0],
    {"path": "/tmp", "exists": True, "mount": "/tmp", "free_bytes": 12 * GiB,
     "inodes_total": 1000, "inodes_free": 999},
]  # fmt: skip


@pytest.mark.parametrize(
    ("declared", "verdict"),
    [({}, "ok"), ({"checks": {"inodes_free_min_pct": 10}}, "ok"),
     ({"checks": {"disk_free_min": "50g"}}, "FAIL"), ({"checks": {"disk_free_min": "10g"}}, "ok")],
)  # fmt: skip
def test_onboarding_and_drift_give_a_small_tmp_one_verdict(
    declared: dict[str, Any], verdict: str
) -> None:
    """Onboarding judges headroom as drift does, on the spec the inventory loaded: nothing
    declared is nothing judged (field note: a 12 GiB tmpfs /tmp refused by onboarding alone)."""
    values = facts(DiskSpace=SMALL_TMP)
    host = new_host({"gpu": "absent", **declared})
    onboarding = {c.name: c for c in host_checks(host, reader(values))}["disk"]

    def everything(cls: type, **_: Any) -> Any:  # drift reads every plan's facts too
        return values[cls] if cls in values else cls().default()

    drift = [f for f in judge(normalise(host.spec), everything) if f.id.startswith("disk.")]
    assert onboarding.status == verdict
    assert ("FAIL" if drift else "ok") == verdict


def test_a_check_whose_facts_are_unreadable_fails_saying_so() -> None:
    odd = facts(Login=Unreadable("Login: ValueError(\"id -u printed 'x'\")"))
    root = checks({}, odd)["root"]
    assert root.status == "FAIL" and "could not be read" in root.detail and "id -u" in root.detail
    assert checks({}, odd)["os"].status == "ok"  # the others still judge


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_preflight_reads_hold_every_read_its_checks_make(engine: str) -> None:
    """Onboarding records what its checks read before the host is converged: judging them
    must find each one, a declared container's included (its inspect once raised KeyError)."""
    repo = {
        "url": "https://x/y.git",
        "ref": "b" * 40,
        "python": {"lockfile": "uv.lock", "imports": ["torch"]},
    }
    train = {"image": "r/x@sha256:" + "a" * 64, "shm_size": "1g"}
    spec = {"engine": engine, "gpu": "auto", "repos": {"/srv/code": repo},
            "containers": {"train": train}}  # fmt: skip
    host = new_host(spec)
    reads = preflight_reads(host)
    assert reads[-1] == (AptSources, {})
    seen = Recorder()

    def answering(cls: type, **kwargs: Any) -> Any:
        seen(cls, **kwargs)
        assert (cls, kwargs) in reads, cls.__name__
        return cls().default()

    host_checks(host, answering)
    assert [(c, k) for c, k in reads[:-1]] == list(seen.reads.values())
    assert ("ContainerTorch", {"engine": engine, "container": "train"}) in [
        (c.__name__, k) for c, k in reads
    ]
    assert required_reads(lambda read: host_checks(host, read)) == reads[:-1]


def _onboard(path: Path, port: int, *extra: str) -> tuple[Any, float]:
    start = time.monotonic()
    result = CliRunner().invoke(
        main, ["onboard", "127.0.0.1", "--port", str(port), "--name", "new",
               "--inventory", str(path), "--timeout", "3", *extra],
    )  # fmt: skip
    return result, time.monotonic() - start


def test_nothing_listening_fails_preflight_within_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(PROFILES.read_bytes())
    with socket.socket() as bound:  # bound, never listening: the port is surely closed
        bound.bind(("127.0.0.1", 0))
        result, elapsed = _onboard(path, bound.getsockname()[1], "--yes")
    assert result.exit_code == 1 and elapsed < 3
    assert result.output.startswith("preflight: cannot reach SSH at 127.0.0.1:")
    assert path.read_bytes() == PROFILES.read_bytes()


def test_refused_login_and_declined_key_write_nothing(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(PROFILES.read_bytes())
    key = generate_key(tmp_path / "host")
    with ssh_server(key) as port:
        declined, _ = _onboard(path, port)  # no --yes, no answer on stdin
        refused, _ = _onboard(path, port, "--yes", "--key", str(generate_key(tmp_path / "me")))
    assert declined.exit_code == 1
    assert "key fingerprint is SHA256:" in declined.output
    assert "preflight: host key not accepted" in declined.output
    assert refused.exit_code == 1
    assert "preflight: cannot log in as root@127.0.0.1" in refused.output
    assert "no key given" not in refused.output
    assert path.read_bytes() == PROFILES.read_bytes()


def test_a_login_refused_without_a_key_names_the_key_option(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(PROFILES.read_bytes())
    with ssh_server(generate_key(tmp_path / "host")) as port:
        refused, _ = _onboard(path, port, "--yes")
    assert refused.exit_code == 1
    assert "preflight: cannot log in as root@127.0.0.1" in refused.output
    assert "(no key given: name the private key with --key FILE)" in refused.output


@pytest.mark.parametrize(
    ("given", "recorded"),
    [("/home/ann/.ssh/rental_ed25519", "~/.ssh/rental_ed25519"),
     ("~/.ssh/k", "~/.ssh/k"), ("/home/ann", "/home/ann"), ("/home/annex/k", "/home/annex/k"),
     ("/srv/keys/k", "/srv/keys/k"), ("keys/k", "keys/k")],
)  # fmt: skip
def test_a_key_under_the_home_is_recorded_as_home_relative(
    given: str, recorded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shell expands `--key ~/.ssh/k`; the inventory must hold what works on every
    machine (a CI runner's home is another), not this one's absolute path."""
    monkeypatch.setenv("HOME", "/home/ann")
    monkeypatch.chdir("/")
    assert home_relative(given, "/home/ann") == recorded
