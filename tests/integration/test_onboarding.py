"""`gpurig onboard` on a sandbox full host (full-4, used by no other engine test) as if it were
a fresh rental: left out of the inventory, then onboarded end to end; and every refusal."""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import testinfra
import yaml
from support import Sandbox, gpurig, host_spec

from gpurig.remote.converge import converge
from gpurig.sandbox.keys import ensure_keypair, public_key
from gpurig.spec.hostkeys import changed_message

HOST = "full-4"
TIMEOUT = 5


def fresh_inventory(box: Sandbox, path: Path, host_key: str | None = None) -> Path:
    """The sandbox inventory without HOST, or with HOST recorded under `host_key`.

    The sandbox shares this machine's disk, so the `full` group asks for little headroom
    instead of onboard's 50g default.
    """
    inventory = yaml.safe_load(box.paths.inventory.read_text())
    inventory["groups"]["full"]["spec"]["checks"] = {"disk_free_min": "1g",
                                                     "inodes_free_min_pct": 1}  # fmt: skip
    entry = inventory["hosts"].pop(HOST)
    if host_key:
        entry["ssh"]["host_key"] = host_key
        inventory["hosts"][HOST] = entry
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


def onboard_argv(inventory: Path, address: str, *extra: str) -> list[str]:
    return ["gpurig", "onboard", address, "--name", HOST, "--inventory", str(inventory),
            "--group", "full", "--yes", "--timeout", str(TIMEOUT), *extra]  # fmt: skip


def onboard(inventory: Path, address: str, *extra: str, env: dict[str, str] | None = None):
    return gpurig(*onboard_argv(inventory, address, *extra)[1:], env=env)


def root_shell(box: Sandbox) -> testinfra.host.Host:
    return testinfra.get_host(f"ssh://{HOST}", ssh_config=str(box.paths.ssh_config))


@contextmanager
def apt_sources(box: Sandbox, line: str) -> Iterator[None]:
    """HOST's apt sources replaced by `line` for the test; the rootfs's own put back after."""
    shell = root_shell(box)
    shell.check_output(
        "mkdir /root/apt-aside && mv /etc/apt/sources.list.d /root/apt-aside/ && "
        "{ [ ! -e /etc/apt/sources.list ] || mv /etc/apt/sources.list /root/apt-aside/; } && "
        f"mkdir /etc/apt/sources.list.d && echo {shlex.quote(line)} > /etc/apt/sources.list"
    )
    try:
        yield
    finally:
        shell.check_output(
            "rm -rf /etc/apt/sources.list /etc/apt/sources.list.d && "
            "mv /root/apt-aside/* /etc/apt/ && rmdir /root/apt-aside"
        )


def with_packages(inventory: Path, packages: list[str]) -> Path:
    doc = yaml.safe_load(inventory.read_text())
    doc["groups"]["full"]["spec"]["packages"] = packages
    inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
    return inventory


@pytest.mark.parametrize("how", ["refused", "silent"])
def test_unreachable_apt_source_is_refused_at_preflight(sandbox: Sandbox, tmp_path: Path, how: str):
    """The issue's case: package sources the host cannot reach. Refused within the timeout,
    before anything is written, naming the source; not minutes of apt retries after recording.
    `refused`: a port on the apt host's address that nothing serves; `silent`: an address on
    the sandbox's bridge where no host answers (nothing leaves the machine)."""
    apt = urlsplit(sandbox.apt_url)
    nowhere = ipaddress.ip_network(sandbox.state.network).broadcast_address - 1
    with socket.socket() as closed:
        closed.bind((apt.hostname, 0))
        port = closed.getsockname()[1]
        dead = f"http://{apt.hostname}:{port}/debian" if how == "refused" else f"http://{nowhere}/d"
        inventory = with_packages(fresh_inventory(sandbox, tmp_path / "fleet.yaml"), ["tmux"])
        before = inventory.read_bytes()
        start = time.monotonic()
        with apt_sources(sandbox, f"deb [trusted=yes] {dead} bookworm main"):
            proc = onboard(inventory, sandbox.state.hosts[HOST].address)
    elapsed = time.monotonic() - start
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL  sources" in proc.stdout, proc.stderr
    verdict = proc.stderr.strip().splitlines()[-1]
    assert verdict.startswith(
        f"onboard failed at preflight (sources): cannot reach {dead} (apt source for packages)"
    ), verdict
    why = ["connection refused"] if how == "refused" else [f"no answer within {TIMEOUT} s",
                                                           "no route to the host"]  # fmt: skip
    assert any(f": {w}; fix the host's network" in verdict for w in why), verdict
    assert verdict.endswith(
        f"then: {shlex.join(onboard_argv(inventory, sandbox.state.hosts[HOST].address))}"
    )
    assert inventory.read_bytes() == before
    assert elapsed < TIMEOUT + 30


def test_converge_failure_says_the_host_is_recorded_and_what_next(sandbox: Sandbox, tmp_path: Path):
    """A reachable source without the package: the converge fails at Packages; the summary
    names apt's own words and the verdict says the host is recorded and what to run."""
    inventory = with_packages(
        fresh_inventory(sandbox, tmp_path / "fleet.yaml"), ["gpurig-no-such-package"]
    )
    state = tmp_path / "state"
    with apt_sources(sandbox, f"deb [trusted=yes] {sandbox.apt_url} /"):
        proc = onboard(
            inventory, sandbox.state.hosts[HOST].address, env={"XDG_STATE_HOME": str(state)}
        )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ok    sources" in proc.stdout, proc.stderr
    assert (
        "  Packages: FAILED Install gpurig-no-such-package: E: Unable to locate package"
        in proc.stdout
    ), proc.stdout + proc.stderr
    [log] = (state / "gpurig" / "logs").glob(f"onboard-{HOST}-*.log")
    assert f"  full log: {log}" in proc.stdout
    assert "Unable to locate package gpurig-no-such-package" in log.read_text()
    verdict = proc.stderr.strip().splitlines()[-1]
    assert verdict.startswith(
        "onboard failed at converge (Packages): E: Unable to locate package "
        "gpurig-no-such-package; fix that on the host or in the spec "
        f"({HOST} is recorded in {inventory}), then: gpurig onboard"
    ), verdict
    assert HOST in yaml.safe_load(inventory.read_text())["hosts"]


def test_onboard_end_to_end(sandbox: Sandbox, tmp_path: Path):
    rec = sandbox.state.hosts[HOST]
    inventory = fresh_inventory(sandbox, tmp_path / "fleet.yaml")
    state = tmp_path / "state"
    proc = onboard(inventory, rec.address, env={"XDG_STATE_HOME": str(state)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SHA256:" in proc.stdout and "verify: drift clean" in proc.stdout
    assert re.search(r"^ok +sources +nothing to fetch for this spec$", proc.stdout, re.M)
    assert "accept: no-gpu; no NVIDIA GPU on the host" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == (
        f"onboard ok: {HOST} converged ({proc.stdout.split('converge: ')[1].split(chr(10))[0]}), "
        f"drift clean, acceptance no-gpu; next: gpurig drift {inventory} --limit {HOST}"
    )
    [record] = (state / "gpurig" / "acceptance").glob(f"*/{HOST}.json")
    assert json.loads(record.read_text())["status"] == "no-gpu"
    accepted = gpurig("accept", HOST, "--inventory", str(inventory), "--format", "json")
    assert accepted.returncode == 0, accepted.stderr
    assert json.loads(accepted.stdout)["reasons"] == [
        "no NVIDIA GPU on the host (nvidia-smi is missing or lists none)"
    ]
    entry = yaml.safe_load(inventory.read_text())["hosts"][HOST]
    assert entry["address"] == rec.address
    assert entry["ssh"] == {"port": 22, "host_key": rec.host_key}
    assert entry["groups"] == ["full"]
    again = converge([inventory], limit=[HOST])
    assert again.returncode == 0 and again.change_count == 0, again.changed
    drift = gpurig("drift", str(inventory), "--limit", HOST, "--format", "json")
    assert drift.returncode == 0, drift.stdout
    assert json.loads(drift.stdout)["hosts"][0]["reachable"]


def test_unreachable_address_fails_within_the_timeout(sandbox: Sandbox, tmp_path: Path):
    inventory = fresh_inventory(sandbox, tmp_path / "fleet.yaml")
    before = inventory.read_bytes()
    start = time.monotonic()
    # On the sandbox's own bridge, where no host is: nothing answers, nothing leaves the machine.
    nowhere = str(ipaddress.ip_network(sandbox.state.network).broadcast_address - 1)
    proc = onboard(inventory, nowhere)
    elapsed = time.monotonic() - start
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"preflight: cannot reach SSH at {nowhere}:22 within 5 s")
    assert elapsed < TIMEOUT + 30  # the timeout plus the CLI's start-up, never pyinfra's 10 s x N
    assert inventory.read_bytes() == before


def test_wrong_key_is_refused(sandbox: Sandbox, tmp_path: Path):
    inventory = fresh_inventory(sandbox, tmp_path / "fleet.yaml")
    before = inventory.read_bytes()
    stranger = ensure_keypair(tmp_path / "stranger_ed25519", "not-authorized")
    proc = onboard(inventory, sandbox.state.hosts[HOST].address, "--key", str(stranger))
    assert proc.returncode == 1
    assert proc.stderr.startswith("preflight: cannot log in as root@"), proc.stderr
    assert "Authentication" in proc.stderr
    assert inventory.read_bytes() == before


def test_login_without_root_or_sudo_is_refused(sandbox: Sandbox, tmp_path: Path):
    root = testinfra.get_host(f"ssh://{HOST}", ssh_config=str(sandbox.paths.ssh_config))
    client_key = public_key(sandbox.paths.client_key)
    # '*': no password but not locked, so sshd lets the key in whatever its PAM setting.
    root.check_output(
        "id plain >/dev/null 2>&1 || useradd -m -s /bin/bash plain; usermod -p '*' plain; "
        "install -d -m 700 -o plain -g plain ~plain/.ssh; "
        f"echo '{client_key}' > ~plain/.ssh/authorized_keys; "
        "chown plain:plain ~plain/.ssh/authorized_keys; chmod 600 ~plain/.ssh/authorized_keys"
    )
    inventory = fresh_inventory(sandbox, tmp_path / "fleet.yaml")
    before = inventory.read_bytes()
    proc = onboard(inventory, f"plain@{sandbox.state.hosts[HOST].address}")
    assert proc.returncode == 1
    assert "FAIL  root" in proc.stdout, proc.stdout
    assert proc.stderr.startswith("preflight: root: plain is not root and has no passwordless sudo")
    assert inventory.read_bytes() == before


def test_recreated_host_with_a_new_key_is_refused_everywhere(sandbox: Sandbox, tmp_path: Path):
    other_key = sandbox.state.hosts["full-1"].host_key
    inventory = fresh_inventory(sandbox, tmp_path / "fleet.yaml", host_key=other_key)
    before = inventory.read_bytes()
    message = changed_message(HOST, str(inventory))

    result = converge([inventory], limit=[HOST])
    assert result.returncode != 0 and not result.changed
    assert result.messages == [message], result.stderr

    drift = gpurig("drift", str(inventory), "--limit", HOST, "--format", "json")
    assert drift.returncode == 1
    [host] = json.loads(drift.stdout)["hosts"]
    assert [f["id"] for f in host["findings"]] == ["host.key_changed"]

    address = sandbox.state.hosts[HOST].address
    proc = onboard(inventory, address)
    assert proc.returncode == 1
    first, verdict = proc.stderr.strip().splitlines()
    assert first == f"preflight: {message}"
    assert verdict.startswith(f"onboard failed at preflight: {message[:80]}")
    assert verdict.endswith(f"then: {shlex.join(onboard_argv(inventory, address))}")
    assert inventory.read_bytes() == before


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_onboard_into_a_group_with_a_container(sandbox: Sandbox, tmp_path: Path, engine: str):
    """The README's shape: a group declaring an engine and a `train` container. Preflight
    probes the declared container before the host is converged (it once raised KeyError)."""
    rec = sandbox.state.hosts[HOST]
    inventory = fresh_inventory(sandbox, tmp_path / "fleet.yaml")
    document = yaml.safe_load(inventory.read_text())
    spec = host_spec(engine, sandbox.state.images["train"])
    spec["checks"] = document["groups"]["full"]["spec"]["checks"]
    document["groups"]["train"] = {"spec": {**spec, "gpu": "absent"}}
    inventory.write_text(yaml.safe_dump(document, sort_keys=False))
    root_shell(sandbox).check_output("mkdir -p /srv/data")
    state = tmp_path / "state"
    argv = [a if a != "full" else "train" for a in onboard_argv(inventory, rec.address)[1:]]
    proc = gpurig(*argv, env={"XDG_STATE_HOME": str(state)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout.strip().splitlines()[-1].startswith(f"onboard ok: {HOST} converged")
    assert yaml.safe_load(inventory.read_text())["hosts"][HOST]["groups"] == ["train"]
    running = root_shell(sandbox).check_output(
        f"{engine} container inspect --format '{{{{.State.Running}}}}' train"
    )
    assert running == "true"
    drift = gpurig("drift", str(inventory), "--limit", HOST, "--format", "json")
    assert drift.returncode == 0, drift.stdout
