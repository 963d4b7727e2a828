"""`gpurig converge`: the packaged deploy run by pyinfra for an installed gpurig, the same run
as `pyinfra inventory.py deploys/gpu_host.py` in a checkout (the sandbox's converge of a real
host by both: tests/integration/test_user_install.py)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from gpurig.remote.converge import DEPLOY_ROOT, inventory_env, pyinfra_argv

GPURIG = [sys.executable, "-m", "gpurig"]


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fleet(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "version: 1\nhosts:\n  gone:\n    address: 127.0.0.1\n"
        f"    ssh: {{port: {closed_port()}, user: root, connect_timeout: 2, host_key: "
        '"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"}\n'
        "    spec: {engine: none, core_dumps: disabled}\n"
    )
    return path


def test_the_command_is_pyinfras_on_the_deploy_tree() -> None:
    argv = pyinfra_argv(limit=["a"], data=["allow_recreate=true"], flags=["--dry"])
    assert argv == [sys.executable, "-m", "pyinfra", "--dry", "--limit", "a", "--data",
                    "allow_recreate=true", str(DEPLOY_ROOT / "inventory.py"),
                    str(DEPLOY_ROOT / "deploys" / "gpu_host.py")]  # fmt: skip
    assert inventory_env(["x.yaml"])["GPURIG_INVENTORY"] == str(Path("x.yaml").resolve())


def test_invalid_input_touches_no_host(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nhosts: {a: {address: 192.0.2.1, spec: {engine: nope}}}\n")
    done = subprocess.run([*GPURIG, "converge", str(bad)], capture_output=True, text=True)
    assert done.returncode == 2 and "hosts.a.spec.engine: expected one of" in done.stderr
    limited = subprocess.run([*GPURIG, "converge", str(fleet(tmp_path)), "--limit", "nope"],
                             capture_output=True, text=True)  # fmt: skip
    assert limited.returncode == 2 and "no host or group named nope" in limited.stderr
    assert "Connecting" not in limited.stdout + limited.stderr


def test_a_host_that_cannot_be_reached_ends_both_runs_alike(tmp_path: Path) -> None:
    """No terminal here: `-y` is implied (pyinfra's prompt would otherwise wait), and the run
    ends as pyinfra's own does, with its exit status."""
    path = fleet(tmp_path)
    ours = subprocess.run([*GPURIG, "converge", str(path)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, cwd=tmp_path, timeout=120)  # fmt: skip
    theirs = subprocess.run(pyinfra_argv(), capture_output=True, text=True, cwd=tmp_path,
                            stdin=subprocess.DEVNULL, env=inventory_env([path]),
                            timeout=120)  # fmt: skip
    assert ours.returncode == theirs.returncode != 0, ours.stderr
    assert "gone" in ours.stdout + ours.stderr
    assert "Press enter" not in ours.stdout
