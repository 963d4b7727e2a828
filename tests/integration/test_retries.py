"""A host that blinks is tried again: a sandbox host behind a relay on this machine's loopback
that drops the first connection (as an sshd that is restarting does: the connection opens and
closes before any banner) and passes every later one on. Drift and the converge reach it on
their second try and say so; a login that is refused is never tried again, nor is a host whose
key does not match."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import REPO_ROOT, Sandbox

from gpurig.remote.drift import probe_hosts
from gpurig.remote.early import dial
from gpurig.sandbox.keys import ensure_keypair
from gpurig.spec.inventory import load_inventory

GPURIG = [sys.executable, "-m", "gpurig"]
OTHER_KEY = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"  # not the host's


class Relay:
    """A TCP relay on 127.0.0.1 to `target`: it closes the first `drop` connections at once and
    relays the others; `accepted` counts every connection."""

    def __init__(self, target: tuple[str, int], drop: int = 1) -> None:
        self.target, self.drop, self.accepted = target, drop, 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.accepted += 1
            if self.accepted <= self.drop:
                client.close()
                continue
            upstream = socket.create_connection(self.target, timeout=10)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for end in (src, dst):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def relay(sandbox: Sandbox) -> Iterator[tuple[Relay, dict, str]]:
    """The last fleet host behind a fresh relay, and its inventory entry through the relay."""
    fleet = yaml.safe_load(sandbox.paths.inventory.read_text())
    name = [h.name for h in sandbox.state.hosts.values() if h.kind == "fleet"][-1]
    entry = fleet["hosts"][name]
    entry.pop("groups", None)
    entry["ssh"] = {**fleet["defaults"]["ssh"], **entry.get("ssh", {}), "connect_timeout": 5}
    found = Relay((entry["address"], int(entry["ssh"].get("port", 22))))
    entry["address"], entry["ssh"]["port"] = "127.0.0.1", found.port
    entry["spec"] = {"engine": "none", "core_dumps": "disabled"}
    yield found, entry, name
    found.close()


def inventory(tmp_path: Path, name: str, entry: dict) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "hosts": {name: entry}}))
    return path


def drift(path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPURIG, "drift", str(path), *options], capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def test_drift_reaches_a_host_that_dropped_its_first_connection(relay, tmp_path: Path) -> None:
    found, entry, name = relay
    path = inventory(tmp_path, name, entry)
    table = drift(path)
    assert table.returncode in (0, 1), table.stderr
    assert f"{name}  reached after 2 tries" in table.stdout, table.stdout
    assert "host.unreachable" not in table.stdout and found.accepted == 2
    found.accepted = 0  # drops the next first connection too
    said = json.loads(drift(path, "--format", "json").stdout)
    assert said["hosts"][0]["reachable"] and said["hosts"][0]["tries"] == 2


def test_no_retry_leaves_the_blink_unreachable(relay, tmp_path: Path) -> None:
    found, entry, name = relay
    said = json.loads(drift(inventory(tmp_path, name, entry), "--format", "json",
                            "--connect-retries", "0").stdout)  # fmt: skip
    host = said["hosts"][0]
    assert not host["reachable"] and host["tries"] == 1 and found.accepted == 1
    assert [f["id"] for f in host["findings"]] == ["host.unreachable"]


def test_a_refused_login_or_host_key_is_not_tried_again(relay, tmp_path: Path) -> None:
    """After the dropped first connection, the host answers and refuses: one more connection
    (the one refused), and no third, however many retries are allowed."""
    found, entry, name = relay
    key = entry["ssh"]["key"]
    stranger = tmp_path / "stranger"
    ensure_keypair(stranger, "not-the-sandbox")
    entry["ssh"]["key"] = str(stranger)
    said = json.loads(drift(inventory(tmp_path, name, entry), "--format", "json",
                            "--connect-retries", "5").stdout)  # fmt: skip
    assert not said["hosts"][0]["reachable"] and said["hosts"][0]["tries"] == 2
    assert found.accepted == 2
    found.accepted = 0
    entry["ssh"]["key"] = key
    assert entry["ssh"]["host_key"].startswith("ssh-ed25519 ")
    entry["ssh"]["host_key"] = f"ssh-ed25519 {OTHER_KEY}"
    said = json.loads(drift(inventory(tmp_path, name, entry), "--format", "json",
                            "--connect-retries", "5").stdout)  # fmt: skip
    host = said["hosts"][0]
    assert [f["id"] for f in host["findings"]] == ["host.key_changed"] and host["tries"] == 2
    assert found.accepted == 2


def test_the_converge_reaches_a_host_that_dropped_its_first_connection(
    relay, tmp_path: Path
) -> None:
    found, entry, name = relay
    path = inventory(tmp_path, name, entry)
    done = subprocess.run([*GPURIG, "converge", str(path)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, cwd=REPO_ROOT, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert found.accepted >= 2
    found.accepted = 0
    none = subprocess.run([*GPURIG, "converge", str(path), "--connect-retries", "0"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          cwd=REPO_ROOT, timeout=300)  # fmt: skip
    assert none.returncode != 0 and found.accepted == 1


def test_drift_reads_over_the_connection_it_dialled_before_loading(relay, tmp_path: Path) -> None:
    """The connection drift opens before pyinfra loads (gpurig.remote.early) is the one paramiko
    logs in over and the read goes through: one connection in all, from that socket's port."""
    found, entry, name = relay
    found.drop = 0
    hosts = load_inventory([inventory(tmp_path, name, entry)]).hosts
    dialled = dial(hosts)
    mine = dialled[name].sock.getsockname()
    used = []

    def then(host: Any, state: dict[str, Any]) -> dict[str, Any]:
        used.append(host.connector.client.get_transport().sock.getsockname())
        return state

    [probed] = probe_hosts(hosts, tmp_path / "cache", then=then, dialled=dialled)
    assert probed.connect_error is None and probed.state is not None and probed.tries == 1
    assert used == [mine] and found.accepted == 1
    assert dialled[name].sock.fileno() == -1  # closed once read
