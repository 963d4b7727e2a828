"""Host keys: fingerprints as OpenSSH prints them, and a changed key recognised from the real
errors paramiko and pyinfra raise, over real connections to a loopback SSH server."""

from __future__ import annotations

import subprocess
from pathlib import Path

import paramiko
import pytest
from click.testing import CliRunner

from gpurig.cli.main import main
from gpurig.remote.converge import converge
from gpurig.remote.drift import run_drift
from gpurig.remote.key_scan import fetch_host_key, host_key_line
from gpurig.spec.hostkeys import (
    changed_message,
    fingerprint,
    is_mismatch,
    jump_key_refusal,
    mismatched_hosts,
)
from gpurig.spec.inventory import load_inventory
from tests.unit.ssh_server import generate_key, ssh_server


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The server's host key and another one (a re-created machine's)."""
    top = tmp_path_factory.mktemp("keys")
    return generate_key(top / "server"), generate_key(top / "other")


def public(path: Path) -> str:
    return " ".join(Path(f"{path}.pub").read_text().split()[:2])


def inventory(path: Path, port: int, host_key: str) -> Path:
    path.write_text(
        "version: 1\nhosts:\n  box:\n    address: 127.0.0.1\n"
        f'    ssh: {{port: {port}, user: root, host_key: "{host_key}"}}\n'
        "    spec: {engine: none, gpu: absent}\n"
    )
    return path


def test_fingerprint_is_what_ssh_keygen_prints(keys: tuple[Path, Path]) -> None:
    for key in keys:
        out = subprocess.run(
            ["ssh-keygen", "-lf", f"{key}.pub"], capture_output=True, text=True, check=True
        ).stdout
        assert fingerprint(public(key)) == out.split()[1]
        assert fingerprint(public(key)).startswith("SHA256:")


def test_fetch_reads_the_server_key_without_logging_in(keys: tuple[Path, Path]) -> None:
    with ssh_server(keys[0]) as port:
        assert fetch_host_key("127.0.0.1", port, 5) == public(keys[0])


def test_bad_host_key_exception_is_a_mismatch(keys: tuple[Path, Path]) -> None:
    got, expected = (paramiko.Ed25519Key.from_private_key_file(str(k)) for k in keys)
    error = paramiko.BadHostKeyException("203.0.113.7", got, expected)
    assert is_mismatch(error) and is_mismatch(str(error))
    assert host_key_line(got) == public(keys[0])
    assert not is_mismatch(paramiko.AuthenticationException("Authentication failed."))
    assert not is_mismatch("Could not connect ([Errno 111] Connection refused)")


def test_mismatched_hosts_reads_pyinfra_log_lines() -> None:
    log = (
        "\x1b[33mWARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!\x1b[0m\n"
        "    [\x1b[1mfull-4\x1b[0m] \x1b[31mSSH host key error (Host key for 10.0.0.4 does not "
        "match.)\x1b[0m\n[fleet-001] Could not connect (timed out)\n"
        f"[node-001] SSH host key error ({jump_key_refusal('10.0.0.9:2222')})\n"
    )
    assert mismatched_hosts(log) == {"full-4": None, "node-001": "10.0.0.9:2222"}


def test_drift_reports_a_changed_key_and_only_then(keys: tuple[Path, Path], tmp_path: Path):
    with ssh_server(keys[0]) as port:
        changed = load_inventory([inventory(tmp_path / "a.yaml", port, public(keys[1]))]).hosts
        same = load_inventory([inventory(tmp_path / "b.yaml", port, public(keys[0]))]).hosts
        [refused] = run_drift(changed, tmp_path / "cache")
        [login_fails] = run_drift(same, tmp_path / "cache")
    assert [f.id for f in refused.findings] == ["host.key_changed"]
    assert refused.findings[0].message == changed_message("box", str(tmp_path / "a.yaml"))
    assert [f.id for f in login_fails.findings] == ["host.unreachable"]


def test_converge_explains_a_changed_key(keys: tuple[Path, Path], tmp_path: Path) -> None:
    with ssh_server(keys[0]) as port:
        path = inventory(tmp_path / "inv.yaml", port, public(keys[1]))
        result = converge([path], limit=["box"])
    assert result.returncode != 0
    assert result.messages == [changed_message("box", str(path))]
    assert not result.changed


def test_onboard_refuses_a_changed_key_and_writes_nothing(
    keys: tuple[Path, Path], tmp_path: Path
) -> None:
    with ssh_server(keys[0]) as port:
        path = inventory(tmp_path / "inv.yaml", port, public(keys[1]))
        before = path.read_bytes()
        result = CliRunner().invoke(
            main, ["onboard", "127.0.0.1", "--port", str(port), "--name", "box",
                   "--inventory", str(path), "--yes"],
        )  # fmt: skip
    assert result.exit_code == 1
    assert f"preflight: {changed_message('box', str(path))}" in result.output
    assert path.read_bytes() == before
