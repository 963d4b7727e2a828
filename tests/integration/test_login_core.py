"""`core_dumps: disabled` judged by the login shell a person really gets, on sandbox hosts: the
account's own login file raising the limit after gpurig's block or file is an error, over SSH
and with `drift --local` on the host, for a user (scope: user, alice on full-1, her
~/.profile) and for root (scope: system, root's ~/.profile on a fleet host).

The login shell's answer once read as nothing at all (the value was lost in a pipe's
subshell), so drift said nothing; these run the real shell as the real account. A converge
once exited 0 with nothing done while drift said error: now it fails, naming the file and line
of the `ulimit` that undid gpurig's, in drift's words."""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import FLEET, FULL, Sandbox, gpurig, remote, write_inventory
from test_change_table import unsaid
from test_user_scope import HOST, LOGIN, USER, as_alice_on_host, install_gpurig, ssh

from gpurig.plans.core_dumps import MANAGED_FILES
from gpurig.remote.converge import converge

pytestmark = pytest.mark.late

ROOT_HOST = "fleet-003"
RAISE = "ulimit -S -c unlimited"  # the account's own line, after gpurig's
ID = "core_dumps.login_shell"


def core_findings(report: dict) -> list[tuple[str, str, str]]:
    [host] = report["hosts"]
    assert host["reachable"], host
    return [(f["id"], f["severity"], f["actual"]) for f in host["findings"]
            if f["id"].startswith("core_dumps.")]  # fmt: skip


def over_ssh(inventory: Path, name: str) -> tuple[int, list[tuple[str, str, str]]]:
    proc = gpurig("drift", str(inventory), "--limit", name, "--format", "json")
    return proc.returncode, core_findings(json.loads(proc.stdout))


@pytest.fixture(scope="module")
def box(sandbox: Sandbox) -> Sandbox:
    proc = sandbox.cli("up", "--fleet", str(FLEET), "--full", str(FULL), "--user", USER)
    assert proc.returncode == 0, proc.stderr
    for host in (HOST, ROOT_HOST):
        install_gpurig(sandbox, host)
    return sandbox


# gpurig's system-wide core limit files (scope: system), which other tests converge on the
# same host: their hard limit 0 would stop alice's own raise before gpurig could judge it.
SYSTEM_LIMITS = " ".join(MANAGED_FILES)


@pytest.fixture
def alice_profile(box: Sandbox) -> Iterator[None]:
    """Alice's ~/.profile as it was, put back after the test (other tests converge it), on a
    host whose system limits are set aside meanwhile."""
    root = remote(box, HOST)
    root.check_output(
        f"tar -cPf /root/core-limits.tar --ignore-failed-read {SYSTEM_LIMITS} 2>/dev/null; "
        f"rm -f {SYSTEM_LIMITS}"
    )
    ssh(box, LOGIN, "cp -p ~/.profile ~/.profile.kept")
    yield
    ssh(box, LOGIN, "mv ~/.profile.kept ~/.profile")
    root.check_output("tar -xPf /root/core-limits.tar && rm -f /root/core-limits.tar")


def test_a_users_own_line_after_gpurigs_block_is_an_error(
    box: Sandbox, alice_profile: None, tmp_path: Path
) -> None:
    spec = {"scope": "user", "engine": "none", "core_dumps": "disabled"}
    inventory = write_inventory(box, tmp_path / "inv.yaml", {LOGIN: spec})
    ssh(box, LOGIN, "printf 'scope: user\\nengine: none\\ncore_dumps: disabled\\n' > core.yaml")
    done = converge([inventory], limit=[LOGIN])
    assert done.returncode == 0, done.stderr[-3000:]
    assert over_ssh(inventory, LOGIN) == (0, [])
    ssh(box, LOGIN, f"echo {shlex.quote(RAISE)} >> ~/.profile")
    assert ssh(box, LOGIN, "bash -lc 'ulimit -c'").strip() == "unlimited"
    expected = (1, [(ID, "error", "ulimit -c unlimited")])
    assert over_ssh(inventory, LOGIN) == expected
    on_host = as_alice_on_host(box, "gpurig drift --local --spec ~/core.yaml --format json")
    assert (on_host.returncode, core_findings(json.loads(on_host.stdout))) == expected
    # The user's line is not the converge's to remove: it changes nothing, and fails, naming
    # the file and line in drift's words (it once exited 0 while drift said error).
    line = ssh(box, LOGIN, "wc -l < ~/.profile").strip()
    named = f"~/.profile:{line} `{RAISE}` raises the limit after gpurig's block"
    assert named in said(inventory, LOGIN)
    again = converge([inventory], limit=[LOGIN])
    assert again.returncode != 0 and again.change_count == 0, again.changed
    assert named in again.stderr and said(inventory, LOGIN) in again.stderr, again.stderr[-3000:]
    assert unsaid(inventory, LOGIN, again) == []


def test_roots_own_line_after_gpurigs_file_is_an_error(box: Sandbox, tmp_path: Path) -> None:
    spec = {"engine": "none", "core_dumps": "disabled"}
    inventory = write_inventory(box, tmp_path / "inv.yaml", {ROOT_HOST: spec})
    ssh(box, ROOT_HOST, "cp -p /root/.profile /root/.profile.kept && printf "
        "'engine: none\\ncore_dumps: disabled\\n' > /root/core.yaml")  # fmt: skip
    try:
        done = converge([inventory], limit=[ROOT_HOST])
        assert done.returncode == 0, done.stderr[-3000:]
        assert over_ssh(inventory, ROOT_HOST) == (0, [])
        ssh(box, ROOT_HOST, f"echo {shlex.quote(RAISE)} >> /root/.profile")
        expected = (1, [(ID, "error", "ulimit -c unlimited")])
        assert over_ssh(inventory, ROOT_HOST) == expected
        code, out = as_root(box, "gpurig drift --local --spec /root/core.yaml --format json")
        assert (code, core_findings(json.loads(out))) == expected
        # Root's bash takes no PS4 from the environment: the file and line all the same.
        line = ssh(box, ROOT_HOST, "wc -l < /root/.profile").strip()
        named = f"~/.profile:{line} `{RAISE}` raises the limit after /etc/profile.d/gpurig-core.sh"
        assert named in said(inventory, ROOT_HOST)
        again = converge([inventory], limit=[ROOT_HOST])
        assert again.returncode != 0 and again.change_count == 0, again.changed
        assert named in again.stderr, again.stderr[-3000:]
        assert unsaid(inventory, ROOT_HOST, again) == []
    finally:
        ssh(box, ROOT_HOST, "mv /root/.profile.kept /root/.profile")
        undo = write_inventory(box, tmp_path / "undo.yaml", {ROOT_HOST: {**spec,
                               "core_dumps": "enabled"}})  # fmt: skip
        assert converge([undo], limit=[ROOT_HOST]).returncode == 0


def said(inventory: Path, name: str) -> str:
    """drift's core_dumps.login_shell for the host, in the one line the converge says it."""
    proc = gpurig("drift", str(inventory), "--limit", name, "--format", "json")
    [host] = json.loads(proc.stdout)["hosts"]
    [found] = [f for f in host["findings"] if f["id"] == ID]
    return f"{found['message']}; expected {found['expected']}; found {found['actual']}"


def as_root(box: Sandbox, script: str) -> tuple[int, str]:
    """`script` over SSH as root on the fleet host: its exit status and stdout."""
    done = subprocess.run(["ssh", "-F", str(box.paths.ssh_config), ROOT_HOST, script],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    return done.returncode, done.stdout
