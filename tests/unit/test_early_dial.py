"""Connections dialled before pyinfra loads (gpurig.remote.early), on this machine's loopback:
handed to paramiko only where they are the connection pyinfra would open, else closed."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpurig.remote.early import MOST, connected, dial, handed, rerouted
from gpurig.spec.inventory import Host, Jump, SshSettings


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    yield server
    server.close()


def host(name: str, port: int, jump: Jump | None = None) -> Host:
    return Host(name, "127.0.0.1", SshSettings(port=port, jump=jump), (), {}, "test", 1)


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def settled(sock: socket.socket) -> bool:
    deadline = time.monotonic() + 5
    while not connected(sock) and time.monotonic() < deadline:
        time.sleep(0.01)
    return connected(sock)


def test_each_host_reached_directly_is_dialled(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    hop = Jump("10.0.0.1", 22, None, None, "ssh-ed25519 AAAA")
    found = dial([host("a", port), host("b", port, hop), host("@local", port)])
    assert sorted(found) == ["a"]  # not the host behind a login node, not pyinfra's @local
    assert settled(found["a"]) and found["a"].getpeername()[1] == port
    found["a"].close()


def test_a_fleet_past_a_few_hosts_is_left_to_pyinfra(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    assert dial([host(f"h{i}", port) for i in range(MOST + 1)]) == {}


def test_a_refused_port_is_never_connected() -> None:
    found = dial([host("a", free_port())])
    for sock in found.values():  # refused at once (none dialled) or by the time it is looked at
        time.sleep(0.05)
        assert not connected(sock)
        sock.close()


@pytest.mark.parametrize(
    ("lookup", "expected"),
    [
        ({"hostname": "203.0.113.5"}, False),
        ({"hostname": "203.0.113.5", "port": "22022", "user": "me"}, False),
        ({"hostname": "gpu.example.net"}, True),
        ({"hostname": "203.0.113.5", "port": "2222"}, True),
        ({"hostname": "203.0.113.5", "proxyjump": "bastion"}, True),
        ({"hostname": "203.0.113.5", "proxycommand": "nc %h %p"}, True),
    ],
)
def test_an_ssh_config_entry_that_sends_pyinfra_elsewhere(lookup: dict, expected: bool) -> None:
    assert rerouted(lookup, "203.0.113.5", 22022) is expected


def connector(port: int, config: Path | None, kwargs: dict | None) -> SimpleNamespace:
    data = {"ssh_hostname": "127.0.0.1", "ssh_port": port, "ssh_config_file": str(config),
            "ssh_paramiko_connect_kwargs": kwargs}  # fmt: skip
    return SimpleNamespace(data=data)


def test_the_socket_is_handed_over_for_one_connect(listener: socket.socket, tmp_path: Path) -> None:
    port = listener.getsockname()[1]
    [sock] = dial([host("a", port)]).values()
    assert settled(sock)
    conn = connector(port, tmp_path / "no-ssh-config", {"timeout": 5})
    with handed(conn, sock):
        assert conn.data["ssh_paramiko_connect_kwargs"] == {"timeout": 5, "sock": sock}
    assert conn.data["ssh_paramiko_connect_kwargs"] == {"timeout": 5}
    assert sock.fileno() != -1  # paramiko's now: it closes it
    sock.close()


@pytest.mark.parametrize("entry", ["Port 2222", "HostName 127.0.0.2", "ProxyJump bastion"])
def test_a_socket_ssh_config_reroutes_is_closed_unused(
    listener: socket.socket, tmp_path: Path, entry: str
) -> None:
    port = listener.getsockname()[1]
    [sock] = dial([host("a", port)]).values()
    assert settled(sock)
    config = tmp_path / "config"
    config.write_text(f"Host 127.0.0.1\n  {entry}\n")
    conn = connector(port, config, None)
    with handed(conn, sock):
        assert conn.data["ssh_paramiko_connect_kwargs"] is None
    assert sock.fileno() == -1


def test_a_socket_not_yet_connected_is_closed_unused(tmp_path: Path) -> None:
    sock = socket.socket()
    sock.setblocking(False)
    conn = connector(22, tmp_path / "no-ssh-config", None)
    with handed(conn, sock):
        assert conn.data["ssh_paramiko_connect_kwargs"] is None
    assert sock.fileno() == -1
