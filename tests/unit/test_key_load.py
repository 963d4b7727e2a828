"""A private key gpurig cannot load is the inventory's error on this machine, said before any
host is touched (exit 2: the key's path and what is wrong), not a host that did not answer:
drift, accept (a host, a group), onboard and the converge refuse it; validate warns of what
the key's bytes and mode say (gpurig.spec.key_paths), as it warns of a key missing here.

The hosts are a loopback port that listens and is never accepted from: a connection attempt
would wait in its backlog, so an empty backlog shows no host was contacted, with no network."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpurig.cli.main import main
from gpurig.remote.key_load import ENCRYPTED, load_problem
from tests.unit.ssh_server import generate_key

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
DIGEST = "registry.example/nccl-tests@sha256:" + "0" * 64


def empty(path: Path) -> None:
    path.write_bytes(b"")


def garbage(path: Path) -> None:
    path.write_bytes(os.urandom(300))


def garbled(path: Path) -> None:
    """A private key's armour around bytes no key parser takes."""
    path.write_text(
        "-----BEGIN OPENSSH PRIVATE KEY-----\nbm90IGEga2V5IGF0IGFsbA==\n"
        "-----END OPENSSH PRIVATE KEY-----\n"
    )
    path.chmod(0o600)


def public(path: Path) -> None:
    """The public half given as the private key (the .pub file)."""
    generate_key(path.with_name("made"))
    path.write_bytes(path.with_name("made.pub").read_bytes())


def too_open(path: Path) -> None:
    generate_key(path)
    path.chmod(0o644)


def encrypted(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "a passphrase", "-C", "t", "-f", str(path)],
        check=True,
    )


KINDS: dict[str, tuple[Callable[[Path], None], str]] = {
    "empty": (empty, "the file is empty"),
    "garbage": (garbage, "it is not a private key in a form gpurig reads"),
    "garbled": (garbled, "paramiko reads no RSA, ECDSA or Ed25519 private key in it"),
    "public": (public, "it holds a public key, not the private key"),
    "mode 0644": (too_open, "its mode 0644 gives other accounts access, and OpenSSH refuses"),
    "encrypted": (encrypted, "it is encrypted, and gpurig has no passphrase for it"),
}


@pytest.fixture
def listening() -> Iterator[Listening]:
    """Two loopback ports that listen (one per host), and whether anyone connected to them."""
    with socket.socket() as first, socket.socket() as second:
        for server in (first, second):
            server.bind(("127.0.0.1", 0))
            server.listen(8)
            server.setblocking(False)
        yield Listening(first, second)


class Listening:
    def __init__(self, *servers: socket.socket) -> None:
        self.servers = servers
        self.ports = [s.getsockname()[1] for s in servers]

    def contacted(self) -> bool:
        for server in self.servers:
            try:
                server.accept()[0].close()
            except BlockingIOError:
                continue
            return True
        return False


def fleet(tmp_path: Path, key: Path, ports: list[int]) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "version: 1\ngroups: {train: {}}\n"
        f"defaults: {{ssh: {{user: root, key: {key}, port: {ports[0]}, connect_timeout: 2}}}}\n"
        "hosts:\n"
        f'  gpu-a:\n    address: 127.0.0.1\n    ssh: {{host_key: "{HOST_KEY}"}}\n'
        "    groups: [train]\n"
        f'    spec: {{engine: docker, acceptance: {{nccl_image: "{DIGEST}"}}}}\n'
        f'  gpu-b:\n    address: 127.0.0.1\n    ssh: {{port: {ports[1]}, host_key: "{HOST_KEY}"}}\n'
        "    groups: [train]\n"
    )
    return path


def refused(stderr: str, key: Path, why: str, fleet_path: Path) -> bool:
    return (
        f"{fleet_path}:5: hosts.gpu-a.ssh.key: cannot load the private key {key}: {why}" in stderr
        and "no host was contacted" in stderr
        and "unreachable" not in stderr
    )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "command",
    [
        ["drift", "{fleet}"],
        ["drift", "{fleet}", "--format", "json"],
        ["accept", "gpu-a", "--inventory", "{fleet}"],
        ["accept", "--group", "train", "--inventory", "{fleet}"],
    ],
    ids=["drift", "drift-json", "accept", "accept-group"],
)
def test_a_key_that_cannot_be_loaded_is_refused_before_any_host(
    kind: str,
    command: list[str],
    tmp_path: Path,
    listening: Listening,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    make, why = KINDS[kind]
    key = tmp_path / "id_test"
    make(key)
    path = fleet(tmp_path, key, listening.ports)
    result = CliRunner().invoke(main, [arg.format(fleet=path) for arg in command])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert refused(result.stderr, key, why, path), result.stderr
    both = command[0] == "drift" or "--group" in command
    assert ("(and 1 other host)" in result.stderr) == both
    assert not listening.contacted()


def test_the_unparsable_key_of_the_field_is_not_an_unreachable_host(
    tmp_path: Path, listening: Listening
) -> None:
    """What drift said before: host.unreachable, "cannot connect: Invalid private key file"."""
    key = tmp_path / "id_test"
    garbled(key)
    path = fleet(tmp_path, key, listening.ports)
    result = CliRunner().invoke(main, ["drift", str(path), "--format", "json"])
    assert result.exit_code == 2 and "host.unreachable" not in result.output
    assert "Invalid private key file" not in result.output
    assert not listening.contacted()


def test_an_encrypted_key_is_refused_with_an_agent_too(
    tmp_path: Path, listening: Listening, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyinfra loads the key ssh.key names itself and asks no agent for it (read in
    pyinfra.connectors.ssh: allow_agent is False where a key is named), so an agent's socket
    changes nothing; pyinfra's own command line asks for the passphrase on a terminal."""
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    key = tmp_path / "id_test"
    encrypted(key)
    path = fleet(tmp_path, key, listening.ports)
    result = CliRunner().invoke(main, ["drift", str(path)])
    assert result.exit_code == 2 and refused(result.stderr, key, ENCRYPTED, path)
    assert load_problem(str(key), passphrase_asked=True) is None
    assert not listening.contacted()


def test_a_loadable_key_goes_on_to_the_hosts(tmp_path: Path) -> None:
    """A good key (0600) is no refusal: drift goes on and finds the port closed."""
    key = generate_key(tmp_path / "id_test")
    with socket.socket() as bound:  # bound, never listening: the port is surely closed
        bound.bind(("127.0.0.1", 0))
        path = fleet(tmp_path, key, [bound.getsockname()[1]] * 2)
        result = CliRunner().invoke(main, ["drift", str(path), "--limit", "gpu-a"])
    assert result.exit_code == 1 and "host.unreachable" in result.stdout
    assert load_problem(str(key)) is None and load_problem(str(tmp_path / "missing")) is None


def test_onboard_refuses_the_key_before_reading_the_host_key(
    tmp_path: Path, listening: Listening
) -> None:
    key = tmp_path / "id_test"
    empty(key)
    path = tmp_path / "new.yaml"
    path.write_text("version: 1\nhosts: {}\n")
    port = str(listening.ports[0])
    result = CliRunner().invoke(
        main,
        ["onboard", "127.0.0.1", "--port", port, "--name", "new", "--inventory", str(path),
         "--key", str(key), "--yes", "--timeout", "2"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"cannot load the private key {key}: the file is empty" in result.stderr
    assert "no host was contacted" in result.stderr
    assert path.read_text() == "version: 1\nhosts: {}\n"
    assert not listening.contacted()


def test_converge_refuses_before_pyinfra_runs(tmp_path: Path, listening: Listening) -> None:
    key = tmp_path / "id_test"
    public(key)
    path = fleet(tmp_path, key, listening.ports)
    done = subprocess.run(
        [sys.executable, "-m", "gpurig", "converge", str(path), "--limit", "train"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert refused(done.stderr, key, KINDS["public"][1], path), done.stderr
    assert "Connecting" not in done.stdout + done.stderr
    assert not listening.contacted()


@pytest.mark.parametrize("kind", ["empty", "garbage", "public", "mode 0644"])
def test_validate_warns_of_a_key_that_cannot_be_loaded_here(
    kind: str, tmp_path: Path, listening: Listening
) -> None:
    """The inventory is valid (exit 0): the key file is this machine's, as a missing one is."""
    make, why = KINDS[kind]
    key = tmp_path / "id_test"
    make(key)
    path = fleet(tmp_path, key, listening.ports)
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0 and result.stdout == "OK: 2 hosts\n"
    assert f"hosts.gpu-a.ssh.key: the private key {key} cannot be loaded here: {why}" in (
        result.stderr
    )
    assert result.stderr.rstrip().endswith("(and 1 other host)")
