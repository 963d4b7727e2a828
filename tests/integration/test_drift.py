"""`gpurig drift` on a converged host, then on the same host changed behind gpurig's back, one
kind at a time: exit 1 with the right finding id each time, and exit 0 after a re-converge."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from support import Sandbox, finding_ids, gpurig, host_spec, remote, write_inventory

from gpurig.remote.converge import converge

HOST = "full-3"  # the Podman host of test_converge.py, with the socket and a container


def drift(inventory: Path) -> tuple[int, list[dict]]:
    proc = gpurig("drift", str(inventory), "--limit", HOST, "--format", "json")
    report = json.loads(proc.stdout)
    return proc.returncode, report["hosts"][0]["findings"]


def error_ids(findings: list[dict]) -> set[str]:
    return finding_ids([f for f in findings if f["severity"] == "error"])


@pytest.fixture(scope="module")
def smallest_fs(sandbox: Sandbox) -> tuple[int, str]:
    """Free KiB and mount point of the fuller of / and /tmp (a tmpfs on this host): drift
    checks free space on both."""
    df = remote(sandbox, HOST).check_output("df -Pk / /tmp | awk 'NR>1 {print $4, $6}'")
    return min((int(kib), mount) for kib, mount in (line.split() for line in df.splitlines()))


@pytest.fixture(scope="module")
def inventory(
    sandbox: Sandbox, smallest_fs: tuple[int, str], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    spec = host_spec("podman", sandbox.state.images["train"])
    remote(sandbox, HOST).check_output("mkdir -p /srv/data")  # the spec's mount source
    # A threshold 2 GiB under today's free space, so filling 4 GiB crosses it.
    spec["checks"] = {"disk_free_min": f"{(smallest_fs[0] >> 20) - 2}g", "inodes_free_min_pct": 1}
    path = write_inventory(sandbox, tmp_path_factory.mktemp("drift") / "inv.yaml", {HOST: spec})
    result = converge([path], limit=[HOST])
    assert result.returncode == 0, result.stderr
    rc, findings = drift(path)
    assert rc == 0, findings
    return path


def assert_drift(inventory: Path, finding_id: str) -> None:
    rc, findings = drift(inventory)
    assert rc == 1
    assert finding_id in error_ids(findings)


def reconverged(inventory: Path) -> None:
    result = converge([inventory], limit=[HOST])
    assert result.returncode == 0, result.stderr
    rc, findings = drift(inventory)
    assert rc == 0, findings


def test_container_recreated_with_another_shm_size(sandbox: Sandbox, inventory: Path):
    image = sandbox.state.images["train"]
    remote(sandbox, HOST).check_output(
        f"podman rm -f train && podman run -d --name train --shm-size 64m {image} "
        "sleep infinity >/dev/null 2>&1 </dev/null"
    )
    assert_drift(inventory, "container.shm_size")
    remote(sandbox, HOST).check_output("podman stop -t 0 train")  # stopped: converge may recreate
    reconverged(inventory)


def test_limits_file_removed(sandbox: Sandbox, inventory: Path):
    remote(sandbox, HOST).check_output("rm /etc/security/limits.d/90-gpurig-core.conf")
    assert_drift(inventory, "core_dumps.file")
    reconverged(inventory)


def test_podman_socket_stopped(sandbox: Sandbox, inventory: Path):
    remote(sandbox, HOST).check_output("systemctl stop podman.socket podman.service")
    assert_drift(inventory, "engine.socket")
    reconverged(inventory)


def test_disk_filled_past_the_threshold(
    sandbox: Sandbox, inventory: Path, smallest_fs: tuple[int, str]
):
    shell = remote(sandbox, HOST)
    fill = f"{smallest_fs[1].rstrip('/')}/gpurig-drift-fill"
    shell.check_output(f"fallocate -l 4G {fill}")
    try:
        assert_drift(inventory, "disk.free")
    finally:
        shell.check_output(f"rm -f {fill}")
    rc, findings = drift(inventory)
    assert rc == 0, findings


def respecified(
    sandbox: Sandbox, inventory: Path, path: Path, edit: Callable[[dict], None]
) -> Path:
    """A copy of the inventory with the host's spec edited: the host itself is left alone."""
    spec = copy.deepcopy(yaml.safe_load(inventory.read_text())["hosts"][HOST]["spec"])
    edit(spec)
    return write_inventory(sandbox, path, {HOST: spec})


def test_a_declared_inode_floor_above_the_hosts_is_drift(
    sandbox: Sandbox, inventory: Path, tmp_path: Path
):
    """The host's real df -i against a floor it cannot meet (every filesystem uses inodes)."""
    floor = respecified(sandbox, inventory, tmp_path / "inv.yaml",
                        lambda spec: spec["checks"].update(inodes_free_min_pct=100))  # fmt: skip
    assert_drift(floor, "disk.inodes")


def test_a_shm_larger_than_the_hosts_memory_is_advice(
    sandbox: Sandbox, inventory: Path, tmp_path: Path
):
    """A declared /dev/shm of 64 TiB: the container differs (error) and the size is advice
    (warn) against the host's real memory."""
    huge = respecified(sandbox, inventory, tmp_path / "inv.yaml",
                       lambda spec: spec["containers"]["train"].update(shm_size="64t"))  # fmt: skip
    _, findings = drift(huge)
    assert "shm.size" in finding_ids([f for f in findings if f["severity"] == "warn"])
