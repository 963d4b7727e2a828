"""User scope (`spec.scope: user`): validated like every key; root-only items refused by
`gpurig validate` at the line of the level that declares them; no sudo for such a host;
defaults that fit a user (a driver checked, not held; a rootless Podman through its socket)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gpurig.cli.main import main
from gpurig.facts.gpurig_node import Login
from gpurig.onboard.onboard import host_checks
from gpurig.read.sources import apt_needed
from gpurig.remote.pyinfra_inventory import host_data
from gpurig.spec.inventory import InventoryError, load_inventory, load_spec_file
from gpurig.spec.model import normalise

DIGEST = "0" * 64
IMAGE = f"registry.example/train@sha256:{DIGEST}"

# Every root-only item a user-scope host can carry, spread over defaults, a group and the host.
ROOT_ONLY = f"""\
version: 1
defaults:
  spec:
    packages: [tmux]
groups:
  gpu:
    spec:
      engine: docker
      nvidia_toolkit: {{version: "1.17.8-1"}}
hosts:
  alice-node:
    address: 10.0.0.5
    ssh: {{user: alice}}
    groups: [gpu]
    spec:
      scope: user
      driver: {{version: "580.95.05", hold: true}}
      compose: {{version: "2.29.7", sha256: "{DIGEST}"}}
      secrets: [{{src: ~/.netrc, dest: /home/alice/.netrc, owner: alice}}]
  root-node:
    address: 10.0.0.6
    groups: [gpu]
"""


def _write(tmp_path: Path, text: str, name: str = "inv.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_validate_refuses_each_root_only_item_of_a_user_scope_host(tmp_path: Path) -> None:
    path = _write(tmp_path, ROOT_ONLY)
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    host = " (host alice-node has scope: user)"
    assert [line.split(": refused with scope: user: ")[0] for line in lines] == [
        f"{path}:4: defaults.spec.packages",
        f"{path}:8: groups.gpu.spec.engine",
        f"{path}:9: groups.gpu.spec.nvidia_toolkit",
        f"{path}:17: hosts.alice-node.spec.driver.hold",
        f"{path}:18: hosts.alice-node.spec.compose",
        f"{path}:19: hosts.alice-node.spec.secrets[0].owner",
    ]
    assert lines[0].endswith(f"ask the cluster's admins for them{host}")
    assert "use engine: podman" in lines[1]
    assert not lines[3].endswith(host)  # declared on the host itself


def test_the_same_items_are_fine_for_a_system_scope_host(tmp_path: Path) -> None:
    text = ROOT_ONLY.replace("      scope: user\n", "").replace(", owner: alice", "")
    assert len(load_inventory([_write(tmp_path, text)]).hosts) == 2


def test_scope_accepts_only_system_or_user(tmp_path: Path) -> None:
    text = "version: 1\nhosts:\n  a:\n    address: 10.0.0.5\n    spec: {scope: root}\n"
    with pytest.raises(InventoryError) as exc:
        load_inventory([_write(tmp_path, text)])
    assert str(exc.value) == (
        f"{tmp_path}/inv.yaml:5: hosts.a.spec.scope: expected one of system, user; got 'root'"
    )


def test_a_spec_file_is_refused_the_same_way(tmp_path: Path) -> None:
    text = (
        f"scope: user\nengine: podman\npodman_socket: false\n"
        f"containers:\n  train: {{image: '{IMAGE}'}}\npackages: [git]\n"
    )
    with pytest.raises(InventoryError) as exc:
        load_spec_file(_write(tmp_path, text, "node.yaml"), "node")
    assert [p.path for p in exc.value.problems] == [("podman_socket",), ("packages",)]
    assert str(exc.value.problems[0]).startswith(f"{tmp_path}/node.yaml:3: podman_socket: ")


def test_user_scope_defaults() -> None:
    spec = normalise({"scope": "user", "engine": "podman", "driver": {"version": "580.95.05"}})
    assert spec["podman_socket"] is True and spec["driver"]["hold"] is False
    assert normalise(spec) == spec
    system = normalise({"engine": "podman", "driver": {"version": "580.95.05"}})
    assert system["scope"] == "system"
    assert system["podman_socket"] is False and system["driver"]["hold"] is True


def test_a_user_scope_login_never_uses_sudo(tmp_path: Path) -> None:
    text = (
        "version: 1\nhosts:\n"
        "  mine: {address: 10.0.0.5, ssh: {user: alice}, spec: {scope: user}}\n"
        "  sudoer: {address: 10.0.0.5, ssh: {user: alice}}\n"
    )
    mine, sudoer = load_inventory([_write(tmp_path, text)]).hosts
    assert "_sudo" not in host_data(mine, None)
    assert host_data(sudoer, None)["_sudo"] is True


def test_user_scope_needs_no_apt_source_and_no_root_in_preflight(tmp_path: Path) -> None:
    text = "version: 1\nhosts:\n  a: {address: 10.0.0.5, spec: {scope: user, engine: podman}}\n"
    [host] = load_inventory([_write(tmp_path, text)]).hosts
    assert apt_needed(host.spec) == []
    assert apt_needed(normalise({"engine": "podman"})) == ["engine"]
    asked = []

    def read(cls: type, **kwargs: Any) -> Any:
        asked.append((cls, kwargs))
        return {"uid": 1000, "user": "alice", "sudo": None} if cls is Login else cls().default()

    checks = {c.name: c for c in host_checks(host, read)}
    assert (checks["root"].status, checks["root"].detail) == (
        "ok",
        "not needed: scope: user acts as alice alone",
    )
    assert [kwargs for cls, kwargs in asked if cls is Login] == [{"sudo": False}]


def test_user_scope_reaches_containers_only_through_the_users_socket() -> None:
    """Every podman gpurig runs as the user goes through the API socket: a local podman with
    another runtime directory would join the service's namespace and break it."""
    from gpurig.checks.judge import drift_reads
    from gpurig.facts.gpurig_acceptance import UserAcceptance
    from gpurig.facts.gpurig_container import (
        ContainerInspect,
        ContainerTorch,
        UserContainerInspect,
        UserContainerTorch,
    )
    from gpurig.facts.round_trip import HostState
    from gpurig.spec.user_scope import CONTAINER_HOST

    spec = normalise({"scope": "user", "engine": "podman", "containers": {"t": {"image": IMAGE}}})
    accept = UserAcceptance().command(engine="podman", container="t")
    assert accept.startswith(f"export {CONTAINER_HOST}\n") and "podman exec t " in accept
    inspect = UserContainerInspect().command(engine="podman", container="t")
    assert (
        inspect.startswith(f"export {CONTAINER_HOST}\n") and "podman container inspect t" in inspect
    )
    # Every container read of a user-scope drift goes through the socket; sudo is never asked.
    reads = drift_reads(spec)
    classes = {cls for cls, _ in reads}
    assert {UserContainerInspect, UserContainerTorch} <= classes
    assert not classes & {ContainerInspect, ContainerTorch}
    assert "sudo" not in HostState().command(reads)
    assert "sudo -n true" in HostState().command(drift_reads(normalise({})))
