"""`ssh.jump` in the inventory model and in what pyinfra is handed: the login node merged like
any ssh setting, its user and key the host's unless it names others, hosts behind it named for
the jump connector, and their recorded keys kept apart from other networks' (private
addresses repeat). Refusals are in the corpus (bad_inventories/jump-*.yaml)."""

from __future__ import annotations

import os
from pathlib import Path

from pyinfra.api import Inventory as PyinfraInventory

from gpurig.remote.jump import JumpConnector
from gpurig.remote.pyinfra_inventory import pyinfra_groups, pyinfra_hosts
from gpurig.spec.inventory import Jump, load_inventory

LOGIN_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKswQKA/As8u2Q0Gc1qWDzk+UhfqSF14YObfvwkjkE2q"
NODE_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGf6yiVzEMx0ZKyYTc8kd7xoZGVUm6RvKtmkKAaB3Trd"
DIRECT_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBZdmvo8hUYKpq1cfdJnRGQx7zvZJQ7Xlg0OYp/fc+m6"

CLUSTER = f"""\
version: 1
defaults:
  ssh: {{user: alice, key: ~/.ssh/cluster_ed25519}}
groups:
  cluster:
    ssh:
      jump: {{address: login.example.org, host_key: "{LOGIN_KEY}"}}
  other-login:
    ssh:
      jump:
        {{address: 203.0.113.9, port: 2222, user: gate, key: /keys/gate, host_key: "{LOGIN_KEY}"}}
hosts:
  gpu-1:
    address: 10.0.0.5
    ssh: {{host_key: "{NODE_KEY}"}}
    groups: [cluster]
  gpu-2:
    address: 10.0.0.5
    ssh: {{host_key: "{NODE_KEY}"}}
    groups: [other-login]
  rental:
    address: 10.0.0.5
    ssh: {{user: root, host_key: "{DIRECT_KEY}"}}
"""


def load(tmp_path: Path) -> dict:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    return {h.name: h for h in load_inventory([path]).hosts}


def test_the_login_node_is_logged_in_to_as_the_host_unless_it_says(tmp_path: Path) -> None:
    hosts = load(tmp_path)
    assert hosts["gpu-1"].ssh.jump == Jump(
        "login.example.org", LOGIN_KEY, 22, "alice", "~/.ssh/cluster_ed25519"
    )
    assert hosts["gpu-2"].ssh.jump == Jump("203.0.113.9", LOGIN_KEY, 2222, "gate", "/keys/gate")
    assert hosts["rental"].ssh.jump is None


def test_hosts_behind_a_login_node_go_to_the_jump_connector(tmp_path: Path) -> None:
    entries = dict(pyinfra_hosts(list(load(tmp_path).values()), tmp_path / "cache"))
    assert set(entries) == {"@gpurig_jump/gpu-1", "@gpurig_jump/gpu-2", "rental"}
    data = entries["@gpurig_jump/gpu-1"]
    assert data["gpurig_jump"] == {
        "address": "login.example.org",
        "port": 22,
        "user": "alice",
        "key": os.path.expanduser("~/.ssh/cluster_ed25519"),
        "host_key": LOGIN_KEY,
    }
    assert (data["ssh_hostname"], data["ssh_strict_host_key_checking"]) == ("10.0.0.5", "yes")
    assert "gpurig_jump" not in entries["rental"]


def test_one_address_on_three_networks_keeps_three_keys_apart(tmp_path: Path) -> None:
    """10.0.0.5 behind two login nodes and reached directly: three machines, each checked
    against its own key (one known_hosts file holding all three would check two wrongly)."""
    entries = dict(pyinfra_hosts(list(load(tmp_path).values()), tmp_path / "cache"))
    files = [Path(data["ssh_known_hosts_file"]) for data in entries.values()]
    assert [f.read_text() for f in files] == [
        f"10.0.0.5 {NODE_KEY}\n",
        f"10.0.0.5 {NODE_KEY}\n",
        f"10.0.0.5 {DIRECT_KEY}\n",
    ]


def test_pyinfra_names_them_as_the_inventory_does(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER)
    groups = pyinfra_groups(load_inventory([path]), tmp_path / "cache")
    names = groups.pop("all")
    inventory = PyinfraInventory((names, {}), **{g: (m, {}) for g, m in groups.items()})
    assert [h.name for h in inventory] == ["gpu-1", "gpu-2", "rental"]
    assert inventory.get_host("gpu-1").connector_cls is JumpConnector
    assert inventory.get_host("rental").connector_cls is not JumpConnector
    assert [h.name for h in inventory.get_group("cluster")] == ["gpu-1"]
    assert inventory.get_host("gpu-2").data.gpurig_jump["port"] == 2222
