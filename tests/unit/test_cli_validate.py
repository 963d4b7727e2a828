"""`gpurig validate`: exit 0 with a count when valid, 2 with the messages on stderr when not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from gpurig.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories" / "examples" / "example.yaml"
BAD = Path(__file__).parent / "bad_inventories" / "size-without-unit.yaml"
# The console script installed next to the interpreter running the tests (.venv/bin).
GPURIG = Path(sys.executable).with_name("gpurig")


def stand_in_key(path: Path) -> Path:
    """A file shaped as a private key, as validate reads one (its armour, mode 0600; validate
    parses no key: the commands that connect do)."""
    path.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n-----END OPENSSH PRIVATE KEY-----\n")
    path.chmod(0o600)
    return path


def test_validate_valid_inventory_exits_0(tmp_path: Path) -> None:
    (tmp_path / ".ssh").mkdir()
    stand_in_key(tmp_path / ".ssh" / "rental_ed25519")  # the example's key, here
    result = CliRunner().invoke(main, ["validate", str(EXAMPLE)], env={"HOME": str(tmp_path)})
    assert result.exit_code == 0, result.output
    assert result.stdout == "OK: 3 hosts\n"
    assert result.stderr == ""


def test_validate_invalid_inventory_exits_2_with_messages_on_stderr() -> None:
    result = CliRunner().invoke(main, ["validate", str(EXAMPLE), str(BAD)])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"{BAD}:11: hosts.a100-1.spec.containers.train.shm_size:")


def test_validate_without_files_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["validate"])
    assert result.exit_code == 2
    assert "Missing argument" in result.stderr


def test_console_script_exit_codes() -> None:
    ok = subprocess.run([GPURIG, "validate", EXAMPLE], capture_output=True, text=True, check=False)
    assert (ok.returncode, ok.stdout) == (0, "OK: 3 hosts\n")
    bad = subprocess.run([GPURIG, "validate", BAD], capture_output=True, text=True, check=False)
    assert bad.returncode == 2
    assert "expected a size: a number and a unit" in bad.stderr


def key_inventory(tmp_path: Path, key: str) -> Path:
    (tmp_path / "checkout" / ".git").mkdir(parents=True, exist_ok=True)
    path = tmp_path / "checkout" / "fleet.yaml"
    path.write_text(f"version: 1\nhosts:\n  a:\n    address: 10.0.0.5\n    ssh: {{key: {key}}}\n")
    return path


def test_validate_warns_of_a_key_file_missing_here(tmp_path: Path) -> None:
    """The inventory is valid (exit 0); the host it names cannot be reached from here."""
    path = key_inventory(tmp_path, "~/.ssh/gone")
    result = CliRunner().invoke(main, ["validate", str(path)], env={"HOME": str(tmp_path)})
    assert result.exit_code == 0 and result.stdout == "OK: 1 host\n"
    assert result.stderr == (
        f"warning: {path}:3: hosts.a.ssh.key: no private key file at {tmp_path}/.ssh/gone on "
        "this machine: drift reports the host unreachable and the converge cannot log in from "
        "here\n"
    )


def test_validate_warns_of_an_absolute_key_path_outside_the_repository(tmp_path: Path) -> None:
    outside, inside = tmp_path / "id_outside", tmp_path / "checkout" / "keys" / "id_inside"
    path = key_inventory(tmp_path, str(outside))
    inside.parent.mkdir()
    for key in (outside, inside):
        stand_in_key(key)
    result = CliRunner().invoke(main, ["validate", str(path)], env={"HOME": str(tmp_path)})
    assert result.exit_code == 0
    assert result.stderr == (
        f"warning: {path}:3: hosts.a.ssh.key: {outside} is an absolute path outside this "
        "repository, so another machine (a CI runner) looks for it there: write it under the "
        "home as ~/... (each machine's own)\n"
    )
    key_inventory(tmp_path, str(inside))
    result = CliRunner().invoke(main, ["validate", str(path)], env={"HOME": str(tmp_path)})
    assert (result.exit_code, result.stderr) == (0, "")


def test_a_key_many_hosts_share_is_said_once(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    hosts = "".join(f"  h{i}: {{address: 10.0.0.{i}}}\n" for i in range(1, 4))
    path.write_text(f"version: 1\ndefaults: {{ssh: {{key: ~/.ssh/gone}}}}\nhosts:\n{hosts}")
    result = CliRunner().invoke(main, ["validate", str(path)], env={"HOME": str(tmp_path)})
    assert result.exit_code == 0 and result.stdout == "OK: 3 hosts\n"
    [line] = result.stderr.splitlines()
    assert line.startswith(f"warning: {path}:4: hosts.h1.ssh.key: no private key file at ")
    assert line.endswith(" (and 2 other hosts)")
    path.write_text(path.read_text().replace("  h3: {address: 10.0.0.3}\n", ""))
    result = CliRunner().invoke(main, ["validate", str(path)], env={"HOME": str(tmp_path)})
    assert result.stdout == "OK: 2 hosts\n" and result.stderr.endswith(" (and 1 other host)\n")
