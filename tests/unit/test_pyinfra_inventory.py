"""The pyinfra side: host data, known_hosts files, and refusing before any connection."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import paramiko

from gpurig.remote.pyinfra_inventory import (
    USER_KNOWN_HOSTS,
    cache_dir,
    host_data,
    inventory_paths,
    known_hosts_line,
    pyinfra_groups,
    write_known_hosts,
)
from gpurig.spec.inventory import Host, SshSettings, load_inventory

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories" / "examples" / "example.yaml"
PYINFRA = Path(sys.executable).with_name("pyinfra")
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKswQKA/As8u2Q0Gc1qWDzk+UhfqSF14YObfvwkjkE2q"


def _host(name: str, port: int = 22, host_key: str | None = KEY, **ssh: Any) -> Host:
    return Host(
        name=name,
        address=f"{name}.example",
        ssh=SshSettings(port=port, host_key=host_key, **ssh),
        groups=(),
        spec={},
        source="fleet.yaml",
        line=1,
    )


def test_known_hosts_line_port_22_is_bare_other_ports_bracketed() -> None:
    assert known_hosts_line("203.0.113.10", 22, KEY) == f"203.0.113.10 {KEY}"
    assert known_hosts_line("203.0.113.10", 2222, KEY) == f"[203.0.113.10]:2222 {KEY}"


def test_known_hosts_file_holds_recorded_keys_named_by_content(tmp_path: Path) -> None:
    hosts = [_host("a"), _host("b", 40022), _host("c", 2222, host_key=None)]
    path = write_known_hosts(hosts, tmp_path / "gpurig")
    assert path is not None
    assert path.read_text() == f"a.example {KEY}\n[b.example]:40022 {KEY}\n"
    assert write_known_hosts(hosts, tmp_path / "gpurig") == path
    other = write_known_hosts(hosts[:1], tmp_path / "gpurig")
    assert other is not None and other != path
    # No temporary files left behind.
    assert sorted((tmp_path / "gpurig").iterdir()) == sorted([path, other])


def test_a_cached_file_with_other_keys_is_rewritten_from_the_pins(tmp_path: Path) -> None:
    """A shared or restored cache directory supplies a file under the right name: only what
    the inventory pins is trusted, whatever the cache held (a file, or a link to one)."""
    hosts = [_host("a")]
    path = write_known_hosts(hosts, tmp_path)
    assert path is not None
    planted = f"a.example {KEY[:-4]}AAAA\nevil.example {KEY}\n"
    path.write_text(planted)
    assert write_known_hosts(hosts, tmp_path) == path
    assert path.read_text() == f"a.example {KEY}\n"
    path.unlink()
    (tmp_path / "elsewhere").write_text(planted)
    path.symlink_to(tmp_path / "elsewhere")
    assert write_known_hosts(hosts, tmp_path) == path
    assert not path.is_symlink() and path.read_text() == f"a.example {KEY}\n"
    assert (tmp_path / "elsewhere").read_text() == planted


def test_paramiko_finds_recorded_keys_under_the_names_it_looks_up(tmp_path: Path) -> None:
    path = write_known_hosts([_host("a"), _host("b", 40022)], tmp_path)
    keys = paramiko.HostKeys(str(path))
    assert keys.lookup("a.example") is not None
    assert keys.lookup("[b.example]:40022") is not None
    assert keys.lookup("b.example") is None


def test_no_recorded_keys_writes_no_file(tmp_path: Path) -> None:
    assert write_known_hosts([_host("a", host_key=None)], tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_host_data_is_strict_and_falls_back_to_user_known_hosts(tmp_path: Path) -> None:
    known = tmp_path / "known_hosts-x"
    recorded = host_data(_host("a", 2222, key="~/.ssh/k", connect_timeout=7), known)
    assert recorded["ssh_known_hosts_file"] == str(known)
    assert recorded["ssh_key"] == os.path.expanduser("~/.ssh/k")
    assert not recorded["ssh_key"].startswith("~")
    assert recorded["ssh_connect_timeout"] == 7
    assert recorded["ssh_paramiko_connect_kwargs"] == {"timeout": 7}
    unrecorded = host_data(_host("b", host_key=None), known)
    assert unrecorded["ssh_known_hosts_file"] == USER_KNOWN_HOSTS
    assert "ssh_connect_timeout" not in unrecorded
    for data in (recorded, unrecorded):
        assert data["ssh_strict_host_key_checking"] == "yes"


def test_pyinfra_groups_for_the_example_fleet(tmp_path: Path) -> None:
    groups = pyinfra_groups(load_inventory([EXAMPLE]), tmp_path)
    assert [name for name, _ in groups["all"]] == ["a100-1", "h100-pod-node", "pod-7"]
    assert groups["skyrl"] == ["a100-1"]
    assert groups["docker-gpu"] == ["a100-1"]
    a100, podman, pod = (data for _, data in groups["all"])
    assert (a100["ssh_hostname"], a100["ssh_port"], a100["ssh_user"]) == (
        "203.0.113.10",
        22,
        "root",
    )
    assert a100["gpurig_groups"] == ["docker-gpu", "skyrl"]
    assert a100["spec"]["containers"]["skyrl-train"]["shm_size"] == "256g"
    assert podman["ssh_known_hosts_file"] == USER_KNOWN_HOSTS
    assert pod["ssh_known_hosts_file"] == a100["ssh_known_hosts_file"]
    assert Path(pod["ssh_known_hosts_file"]).parent == tmp_path
    assert pod["spec"]["engine"] == "none"
    assert podman["_sudo"] is True  # user ubuntu: operations run through sudo
    assert "_sudo" not in a100 and "_sudo" not in pod


def test_inventory_paths_env_var_else_top_level_yaml_only(tmp_path: Path) -> None:
    (tmp_path / "inventories" / "examples").mkdir(parents=True)
    for name in ("inventories/b.yaml", "inventories/a.yaml", "inventories/examples/x.yaml"):
        (tmp_path / name).touch()
    assert inventory_paths(tmp_path, {}) == [
        tmp_path / "inventories" / "a.yaml",
        tmp_path / "inventories" / "b.yaml",
    ]
    named = {"GPURIG_INVENTORY": os.pathsep.join(["one.yaml", "", "two.yaml"])}
    assert inventory_paths(tmp_path, named) == [Path("one.yaml"), Path("two.yaml")]


def test_cache_dir_prefers_xdg_cache_home() -> None:
    assert cache_dir({"XDG_CACHE_HOME": "/xdg"}) == Path("/xdg/gpurig")
    assert cache_dir({}) == Path(os.path.expanduser("~")) / ".cache" / "gpurig"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run_pyinfra(tmp_path: Path, image: str) -> subprocess.CompletedProcess[str]:
    """`pyinfra -y inventory.py exec -- true` from the repository root, on a loopback host."""
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        textwrap.dedent(f"""
            version: 1
            hosts:
              loop:
                address: 127.0.0.1
                ssh: {{port: {_free_port()}, user: nobody, connect_timeout: 5}}
                spec:
                  containers:
                    c: {{image: "{image}"}}
            """),
        encoding="utf-8",
    )
    env = {**os.environ, "GPURIG_INVENTORY": str(fleet), "XDG_CACHE_HOME": str(tmp_path)}
    return subprocess.run(
        [PYINFRA, "-y", "inventory.py", "exec", "--", "true"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_pyinfra_exits_2_on_invalid_inventory_before_connecting(tmp_path: Path) -> None:
    result = _run_pyinfra(tmp_path, "busybox:latest")
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{tmp_path / 'fleet.yaml'}:9: hosts.loop.spec.containers.c.image:" in result.stderr
    output = result.stdout + result.stderr
    assert "Connecting to hosts" not in output
    assert "Could not connect" not in output


def test_pyinfra_without_any_inventory_exits_2_naming_what_it_looked_for(tmp_path: Path) -> None:
    """A checkout's inventory.py where inventories/ holds only its examples (a fresh clone):
    the converge of nothing is refused, not passed."""
    (tmp_path / "inventories" / "examples").mkdir(parents=True)
    (tmp_path / "inventories" / "examples" / "example.yaml").write_text(EXAMPLE.read_text())
    (tmp_path / "inventory.py").write_text((ROOT / "inventory.py").read_text())
    env = {k: v for k, v in os.environ.items() if k != "GPURIG_INVENTORY"}
    result = subprocess.run(
        [PYINFRA, "-y", str(tmp_path / "inventory.py"), str(ROOT / "deploys" / "gpu_host.py")],
        cwd=tmp_path, env={**env, "XDG_CACHE_HOME": str(tmp_path)}, capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    [said] = [line for line in result.stderr.splitlines() if "no inventory" in line]
    assert said.startswith(f"{tmp_path / 'inventories' / '*.yaml'}: no inventory: ")
    assert "GPURIG_INVENTORY is not set" in said and "examples" in said


def test_pyinfra_connects_when_inventory_is_valid(tmp_path: Path) -> None:
    """Control for the test above: the same run with a valid image does try to connect."""
    result = _run_pyinfra(tmp_path, "busybox@sha256:" + "0" * 64)
    output = result.stdout + result.stderr
    assert result.returncode not in (0, 2), output
    assert "Connecting to hosts" in output
    assert "[loop] Could not connect" in output
