"""Connections dialled before pyinfra loads (gpurig.remote.early), on this machine's loopback:
handed to paramiko only where they are the connection pyinfra would open, else closed."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpurig.remote.early import MOST, TIMED_OUT, dial, handed, rerouted
from gpurig.spec.inventory import Host, Jump, SshSettings


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    yield server
    server.close()


NO_CONFIG = Path("/nonexistent/ssh_config")


def host(name: str, port: int, jump: Jump | None = None) -> Host:
    return Host(name, "127.0.0.1", SshSettings(port=port, jump=jump), (), {}, "test", 1)


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def test_each_host_reached_directly_is_dialled(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    hop = Jump("10.0.0.1", 22, None, None, "ssh-ed25519 AAAA")
    found = dial([host("a", port), host("b", port, hop), host("@local", port)], NO_CONFIG)
    assert sorted(found) == ["a"]  # not the host behind a login node, not pyinfra's @local
    with handed(connector(None), found["a"]) as timed_out:
        assert timed_out is None and found["a"].sock.getpeername()[1] == port
    found["a"].sock.close()


def test_a_fleet_past_a_few_hosts_is_left_to_pyinfra(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    assert dial([host(f"h{i}", port) for i in range(MOST + 1)], NO_CONFIG) == {}


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


def connector(kwargs: dict | None) -> SimpleNamespace:
    config = SimpleNamespace(CONNECT_TIMEOUT=5)
    return SimpleNamespace(
        data={"ssh_paramiko_connect_kwargs": kwargs}, state=SimpleNamespace(config=config)
    )


def test_the_socket_is_handed_over_for_one_connect(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    [started] = dial([host("a", port)], NO_CONFIG).values()
    conn = connector({"timeout": 5})
    with handed(conn, started) as timed_out:
        assert timed_out is None
        assert conn.data["ssh_paramiko_connect_kwargs"] == {"timeout": 5, "sock": started.sock}
    assert conn.data["ssh_paramiko_connect_kwargs"] == {"timeout": 5}
    assert started.sock.fileno() != -1  # paramiko's now: it closes it
    started.sock.close()


def test_a_refused_handshake_is_left_to_pyinfra() -> None:
    dialled = dial([host("a", free_port())], NO_CONFIG)
    for started in dialled.values():  # refused at once (none dialled), or when looked at
        conn = connector(None)
        with handed(conn, started) as timed_out:
            assert timed_out is None and conn.data["ssh_paramiko_connect_kwargs"] is None
        assert started.sock.fileno() == -1


def test_a_handshake_unanswered_within_the_connect_timeout_is_that_try_s_timeout() -> None:
    """A listener whose queue is full drops new handshakes (as a host that does not answer)."""
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        port = full.getsockname()[1]
        queued = []
        with contextlib.suppress(TimeoutError):  # until the queue is full
            while len(queued) < 8:
                queued.append(socket.create_connection(("127.0.0.1", port), timeout=0.3))
        [started] = dial([host("a", port)], NO_CONFIG).values()
        conn = connector({"timeout": 0.3})
        began = time.monotonic()
        with handed(conn, started) as timed_out:
            assert timed_out == TIMED_OUT and conn.data["ssh_paramiko_connect_kwargs"] == {
                "timeout": 0.3
            }
        assert 0.2 < time.monotonic() - began < 2 and started.sock.fileno() == -1
        for sock in queued:
            sock.close()


@pytest.mark.parametrize(
    "entry", ["Port 2222", "HostName 127.0.0.2", "ProxyJump bastion", "ProxyCommand nc %h %p"]
)
def test_no_host_ssh_config_sends_elsewhere_is_dialled(
    listener: socket.socket, tmp_path: Path, entry: str
) -> None:
    port = listener.getsockname()[1]
    config = tmp_path / "config"
    config.write_text(f"Host 127.0.0.1\n  {entry}\nHost 127.0.0.*\n  Port {port}\n")
    assert dial([host("a", port)], config) == {}
    config.write_text(f"Host 10.*\n  {entry}\nHost 127.0.0.1\n  User me\n  Port {port}\n")
    assert list(dial([host("a", port)], config)) == ["a"]


@pytest.mark.parametrize("line", ["Include ~/.ssh/conf.d/*", "  match host 127.0.0.1"])
def test_an_ssh_config_gpurig_does_not_follow_dials_nothing(
    listener: socket.socket, tmp_path: Path, line: str
) -> None:
    config = tmp_path / "config"
    config.write_text(f"{line}\n")
    assert dial([host("a", listener.getsockname()[1])], config) == {}


def test_a_name_with_more_than_one_address_is_left_to_paramiko(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """paramiko tries each address in turn (a dual-stack name whose IPv6 goes nowhere still
    connects over IPv4): one dialled address would lose that."""
    port = listener.getsockname()[1]
    resolve = socket.getaddrinfo
    both = resolve("127.0.0.1", port, type=socket.SOCK_STREAM) + resolve(
        "127.0.0.2", port, type=socket.SOCK_STREAM
    )
    monkeypatch.setattr(socket, "getaddrinfo", lambda *_, **__: both)
    assert dial([host("a", port)], NO_CONFIG) == {}
    monkeypatch.setattr(socket, "getaddrinfo", lambda *_, **__: both[:1] * 2)  # one, twice
    found = dial([host("a", port)], NO_CONFIG)
    assert list(found) == ["a"]
    found["a"].sock.close()
