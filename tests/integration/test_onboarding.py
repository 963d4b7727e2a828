"""`gpurig onboard` on a sandbox full host (full-4, used by no other engine test) as if it were
a fresh rental: left out of the inventory, then onboarded end to end; and every refusal."""

from __future__ import annotations

import ipaddress
import json
import time
from pathlib import Path

import testinfra
import yaml
from support import Sandbox, gpurig

from gpurig.converge import converge
from gpurig.hostkeys import changed_message
from gpurig.sandbox.keys import ensure_keypair, public_key

HOST = "full-4"
TIMEOUT = 5


def fresh_inventory(box: Sandbox, path: Path, host_key: str | None = None) -> Path:
    """The sandbox inventory without HOST, or with HOST recorded under `host_key`.

    The sandbox shares this machine's disk, so the `full` group asks for little headroom
    instead of onboard's 50g default.
    """
    inventory = yaml.safe_load(box.paths.inventory.read_text())
    inventory["groups"]["full"]["spec"]["checks"] = {"disk_free_min": "1g",
                                                     "inodes_free_min_pct": 1}  # fmt: skip
    entry = inventory["hosts"].pop(HOST)
    if host_key:
        entry["ssh"]["host_key"] = host_key
        inventory["hosts"][HOST] = entry
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


def onboard(inventory: Path, address: str, *extra: str):
    return gpurig("onboard", address, "--name", HOST, "--inventory", str(inventory),
                  "--group", "full", "--yes", "--timeout", str(TIMEOUT), *extra)  # fmt: skip


def test_onboard_end_to_end(sandbox: Sandbox, tmp_path: Path):
    rec = sandbox.state.hosts[HOST]
    inventory = fresh_inventory(sandbox, tmp_path / "fleet.yaml")
    proc = onboard(inventory, rec.address)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SHA256:" in proc.stdout and "verify: drift clean" in proc.stdout
    entry = yaml.safe_load(inventory.read_text())["hosts"][HOST]
    assert entry["address"] == rec.address
    assert entry["ssh"] == {"port": 22, "host_key": rec.host_key}
    assert entry["groups"] == ["full"]
    again = converge([inventory], limit=[HOST])
    assert again.returncode == 0 and again.change_count == 0, again.changed
    drift = gpurig("drift", str(inventory), "--limit", HOST, "--format", "json")
    assert drift.returncode == 0, drift.stdout
    assert json.loads(drift.stdout)["hosts"][0]["reachable"]


def test_unreachable_address_fails_within_the_timeout(sandbox: Sandbox, tmp_path: Path):
    inventory = fresh_inventory(sandbox, tmp_path / "fleet.yaml")
    before = inventory.read_bytes()
    start = time.monotonic()
    # On the sandbox's own bridge, where no host is: nothing answers, nothing leaves the machine.
    nowhere = str(ipaddress.ip_network(sandbox.state.network).broadcast_address - 1)
    proc = onboard(inventory, nowhere)
    elapsed = time.monotonic() - start
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"preflight: cannot reach SSH at {nowhere}:22 within 5 s")
    assert elapsed < TIMEOUT + 30  # the timeout plus the CLI's start-up, never pyinfra's 10 s x N
    assert inventory.read_bytes() == before


def test_wrong_key_is_refused(sandbox: Sandbox, tmp_path: Path):
    inventory = fresh_inventory(sandbox, tmp_path / "fleet.yaml")
    before = inventory.read_bytes()
    stranger = ensure_keypair(tmp_path / "stranger_ed25519", "not-authorized")
    proc = onboard(inventory, sandbox.state.hosts[HOST].address, "--key", str(stranger))
    assert proc.returncode == 1
    assert proc.stderr.startswith("preflight: cannot log in as root@"), proc.stderr
    assert "Authentication" in proc.stderr
    assert inventory.read_bytes() == before


def test_login_without_root_or_sudo_is_refused(sandbox: Sandbox, tmp_path: Path):
    root = testinfra.get_host(f"ssh://{HOST}", ssh_config=str(sandbox.paths.ssh_config))
    client_key = public_key(sandbox.paths.client_key)
    # '*': no password but not locked, so sshd lets the key in whatever its PAM setting.
    root.check_output(
        "id plain >/dev/null 2>&1 || useradd -m -s /bin/bash plain; usermod -p '*' plain; "
        "install -d -m 700 -o plain -g plain ~plain/.ssh; "
        f"echo '{client_key}' > ~plain/.ssh/authorized_keys; "
        "chown plain:plain ~plain/.ssh/authorized_keys; chmod 600 ~plain/.ssh/authorized_keys"
    )
    inventory = fresh_inventory(sandbox, tmp_path / "fleet.yaml")
    before = inventory.read_bytes()
    proc = onboard(inventory, f"plain@{sandbox.state.hosts[HOST].address}")
    assert proc.returncode == 1
    assert "FAIL  root" in proc.stdout, proc.stdout
    assert proc.stderr.startswith("preflight: root: plain is not root and has no passwordless sudo")
    assert inventory.read_bytes() == before


def test_recreated_host_with_a_new_key_is_refused_everywhere(sandbox: Sandbox, tmp_path: Path):
    other_key = sandbox.state.hosts["full-1"].host_key
    inventory = fresh_inventory(sandbox, tmp_path / "fleet.yaml", host_key=other_key)
    before = inventory.read_bytes()
    message = changed_message(HOST, str(inventory))

    result = converge([inventory], limit=[HOST])
    assert result.returncode != 0 and not result.changed
    assert result.messages == [message], result.stderr

    drift = gpurig("drift", str(inventory), "--limit", HOST, "--format", "json")
    assert drift.returncode == 1
    [host] = json.loads(drift.stdout)["hosts"]
    assert [f["id"] for f in host["findings"]] == ["host.key_changed"]

    proc = onboard(inventory, sandbox.state.hosts[HOST].address)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"preflight: {message}"
    assert inventory.read_bytes() == before
