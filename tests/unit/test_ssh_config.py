"""`gpurig ssh-config`: an ssh_config that OpenSSH reads as gpurig connects, host keys checked
against the recorded ones (for plain ssh and testinfra's ssh:// backend)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpurig.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "inventories" / "examples" / "cluster.yaml"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIC6Gta2mvedBucsFfPREIwJjDZYicLJ3stV9xpo/5d3g"


def config(tmp_path: Path, *inventories: Path) -> Path:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path / "home")}
    result = CliRunner().invoke(main, ["ssh-config", *map(str, inventories)], env=env)
    assert result.exit_code == 0, result.output
    path = tmp_path / "ssh_config"
    path.write_text(result.stdout)
    return path


def resolved(path: Path, name: str) -> dict[str, str]:
    """What OpenSSH makes of the config for `name` (ssh -G connects nowhere)."""
    out = subprocess.run(["ssh", "-G", "-F", str(path), name], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


@pytest.mark.skipif(not shutil.which("ssh"), reason="needs OpenSSH's client")
def test_a_rental_is_reached_as_gpurig_reaches_it(tmp_path: Path) -> None:
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(
        "version: 1\nhosts:\n  a100-3:\n    address: 203.0.113.7\n"
        f'    ssh: {{port: 40022, user: root, key: ~/.ssh/rental_ed25519, host_key: "{KEY}"}}\n'
    )
    seen = resolved(config(tmp_path, inventory), "a100-3")
    assert (seen["hostname"], seen["port"], seen["user"]) == ("203.0.113.7", "40022", "root")
    # ~ is $HOME's, where drift and the converge find the key; OpenSSH would expand it from
    # the password database (a CI runner's or a test's HOME is not always that).
    assert seen["identityfile"] == str(tmp_path / "home" / ".ssh" / "rental_ed25519")
    assert seen["stricthostkeychecking"] == "true"
    known = Path(seen["userknownhostsfile"])
    assert known.read_text() == f"[203.0.113.7]:40022 {KEY}\n"


@pytest.mark.skipif(not shutil.which("ssh"), reason="needs OpenSSH's client")
def test_a_node_behind_its_login_node_goes_through_it_both_keys_pinned(tmp_path: Path) -> None:
    path = config(tmp_path, CLUSTER)
    one, two = resolved(path, "a100-node-01"), resolved(path, "a100-node-02")
    assert one["proxyjump"] != two["proxyjump"]  # the same login node, as two accounts
    logins = [resolved(path, node["proxyjump"]) for node in (one, two)]
    assert [login["user"] for login in logins] == ["alice", "alice-gw"]
    for login in logins:
        assert login["hostname"] == "203.0.113.50"
        assert Path(login["userknownhostsfile"]).read_text().startswith("203.0.113.50 ssh-ed25519 ")
    assert Path(one["userknownhostsfile"]).read_text() == f"10.1.4.17 {KEY}\n"


def test_an_invalid_inventory_exits_2() -> None:
    bad = ROOT / "tests" / "unit" / "bad_inventories" / "size-without-unit.yaml"
    result = CliRunner().invoke(main, ["ssh-config", str(bad)])
    assert result.exit_code == 2 and result.stdout == ""
