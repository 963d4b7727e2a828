"""benchmarks/relay.py on loopback: an echo server behind the relay, timed and checked."""

from __future__ import annotations

import argparse
import json
import os
import socket
import socketserver
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from benchmarks.relay import parse_target

ROOT = Path(__file__).resolve().parents[2]
DELAY = 0.05
SLACK = 0.04  # scheduling on a busy shared machine; the floor (2 x delay) is exact
GREETING = b"hello from the server\n"


class Echo(socketserver.BaseRequestHandler):
    """Greets when `greet` is set, then echoes until the client half-closes, then closes."""

    greet = False

    def handle(self) -> None:
        if self.greet:
            self.request.sendall(GREETING)
        while data := self.request.recv(65536):
            self.request.sendall(data)


class Greeter(Echo):
    greet = True


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, int]]:
    started = {}
    for name, handler in (("echo", Echo), ("greeter", Greeter)):
        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started[name] = server
    yield {name: s.server_address[1] for name, s in started.items()}
    for server in started.values():
        server.shutdown()
        server.server_close()


def start_relay(targets: list[str], lifetime_s: float = 120) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.relay", "--delay-ms", str(DELAY * 1000),
         "--lifetime-s", str(lifetime_s), *targets],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


@pytest.fixture(scope="module")
def relay(servers: dict[str, int]) -> Iterator[dict[str, int]]:
    """Listening ports in front of the echo server, the greeter and a closed port."""
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        closed = spare.getsockname()[1]
    targets = {
        "echo": f"127.0.0.1:{servers['echo']}",
        "greeter": f"127.0.0.1:{servers['greeter']}",
        "closed": f"127.0.0.1:{closed}",
    }
    proc, ports = start_relay(list(targets.values()))
    yield {name: ports[target] for name, target in targets.items()}
    assert proc.stdin is not None
    proc.stdin.close()  # the relay stops when its standard input closes
    assert proc.wait(timeout=10) == 0


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, got = [], 0
    while got < size:
        chunk = sock.recv(min(65536, size - got))
        assert chunk, f"connection closed after {got} of {size} bytes"
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def round_trip(sock: socket.socket, payload: bytes) -> float:
    began = time.monotonic()
    sock.sendall(payload)
    assert recv_exactly(sock, len(payload)) == payload
    return time.monotonic() - began


def test_a_round_trip_costs_twice_the_delay(relay: dict[str, int]) -> None:
    with socket.create_connection(("127.0.0.1", relay["echo"])) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        round_trip(sock, b"warm-up")  # the connection's set-up costs more: measured below
        times = [round_trip(sock, f"ping {i}".encode()) for i in range(7)]
    assert min(times) >= 2 * DELAY
    assert statistics.median(times) < 2 * DELAY + SLACK, times


def test_first_bytes_wait_for_the_handshake_round_trip(relay: dict[str, int]) -> None:
    """Over a real link a server's greeting arrives two round trips after connect():
    SYN, SYN-ACK, then the ACK reaches the server, which greets; 4 x delay."""
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", relay["greeter"])) as sock:
        assert recv_exactly(sock, len(GREETING)) == GREETING
        elapsed = time.monotonic() - began
    assert 4 * DELAY <= elapsed < 4 * DELAY + SLACK


def test_large_payload_arrives_intact_and_in_order(relay: dict[str, int]) -> None:
    payload = os.urandom(8 * 1024 * 1024)
    with socket.create_connection(("127.0.0.1", relay["echo"])) as sock:
        began = time.monotonic()

        def send() -> None:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)  # the half-close travels too: the echo then ends

        sender = threading.Thread(target=send)
        sender.start()
        received = bytearray()
        while chunk := sock.recv(1 << 20):
            received += chunk
        sender.join()
        elapsed = time.monotonic() - began
    assert len(received) == len(payload)
    assert bytes(received) == payload
    assert elapsed >= 2 * DELAY


def test_many_connections_are_relayed_at_once(relay: dict[str, int]) -> None:
    def session(i: int) -> float:
        with socket.create_connection(("127.0.0.1", relay["echo"])) as sock:
            began = time.monotonic()
            for j in range(3):
                round_trip(sock, f"connection {i} message {j} ".encode() * 100)
            return time.monotonic() - began

    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=64) as pool:
        per_connection = list(pool.map(session, range(64)))
    elapsed = time.monotonic() - began
    assert min(per_connection) >= 3 * 2 * DELAY
    # One after the other they would take 64 x (handshake + 3 round trips) = 32 s at least; a
    # relay serving them at once takes about one session. Half the serial time proves they
    # overlapped without timing the machine (a loaded 2-core runner took 8.2 s once).
    assert elapsed < 64 * (4 + 3 * 2) * DELAY / 2


def test_a_refused_target_closes_the_client(relay: dict[str, int]) -> None:
    with socket.create_connection(("127.0.0.1", relay["closed"])) as sock:
        sock.settimeout(5)
        assert sock.recv(1) == b""


def test_the_relay_stops_after_its_lifetime(servers: dict[str, int]) -> None:
    proc, _ = start_relay([f"127.0.0.1:{servers['echo']}"], lifetime_s=0.5)
    began = time.monotonic()  # after it listens: a busy machine's interpreter start-up is not it
    assert proc.wait(timeout=10) == 0
    assert time.monotonic() - began < 5


@pytest.mark.parametrize(
    ("text", "target"),
    [("10.77.0.2:22", ("10.77.0.2", 22)), ("[::1]:2222", ("::1", 2222))],
)
def test_parse_target(text: str, target: tuple[str, int]) -> None:
    assert parse_target(text) == target


@pytest.mark.parametrize("text", ["10.77.0.2", ":22", "host:ssh"])
def test_parse_target_refuses(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected HOST:PORT"):
        parse_target(text)
