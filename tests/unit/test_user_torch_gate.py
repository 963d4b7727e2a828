"""A user's container's torch is asked only where the user's Podman service does not answer
that there is no such container (facts/gpurig_container.py, UserContainerTorch): a real HTTP
service on a unix socket, a stand-in `podman` that logs each exec, the fact's own command."""

from __future__ import annotations

import http.server
import os
import socketserver
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpurig.facts.gpurig_container import UserContainerTorch


class _Service(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _handler(code: int) -> type[http.server.BaseHTTPRequestHandler]:
    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(code)
            self.end_headers()

        def address_string(self) -> str:  # a unix socket has no client address
            return "unix"

        def log_message(self, *_: object) -> None:
            return

    return Answer


@pytest.fixture
def service(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    sock = tmp_path / "podman.sock"
    server = _Service(str(sock), _handler(request.param))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield sock
    server.shutdown()
    server.server_close()


def _run(sock: Path, tmp_path: Path) -> tuple[str, list[str]]:
    """The fact's torch part run with CONTAINER_HOST at `sock`: what it printed, and the
    stand-in podman's calls."""
    bin_dir, log = tmp_path / "bin", tmp_path / "podman.log"
    bin_dir.mkdir()
    (bin_dir / "podman").write_text(f'#!/bin/sh\necho "$1 $2" >>{log}\necho "gpurig-torch null"\n')
    (bin_dir / "podman").chmod(0o755)
    command = UserContainerTorch().command(engine="podman", container="runtime")
    # The socket the service listens on, where the user's would be.
    command = command.replace("export CONTAINER_HOST=", "true ", 1)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "CONTAINER_HOST": f"unix://{sock}"}  # fmt: skip
    done = subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True)
    return done.stdout, log.read_text().split("\n")[:-1] if log.exists() else []


@pytest.mark.parametrize("service", [404], indirect=True)
def test_no_such_container_no_exec(service: Path, tmp_path: Path) -> None:
    out, calls = _run(service, tmp_path)
    assert calls == [] and "gpurig-torch" not in out


@pytest.mark.parametrize("service", [200, 500], indirect=True)
def test_any_other_answer_asks_the_container(service: Path, tmp_path: Path) -> None:
    out, calls = _run(service, tmp_path)
    assert calls == ["exec runtime"] and "gpurig-torch null" in out


def test_no_service_at_all_asks_the_container(tmp_path: Path) -> None:
    out, calls = _run(tmp_path / "nothing.sock", tmp_path)
    assert calls == ["exec runtime"] and "gpurig-torch null" in out
