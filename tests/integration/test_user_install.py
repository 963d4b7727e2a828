"""gpurig on a user's own machine, as the install page says: a plain account without sudo on a
sandbox full host that has only Debian's python3 and python3-venv installs gpurig from a
wheelhouse with `uv tool install` and with pipx (no root, no apt, no index), then validates,
converges and checks another sandbox host from its inventory: changes, then none, then a
clean drift. The same drift converged from this checkout by `pyinfra inventory.py
deploys/gpu_host.py` makes the same changes."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from support import REPO_ROOT, Sandbox, remote

from gpurig.fsutil import xdg_dir
from gpurig.remote.converge import inventory_env, pyinfra_argv

LAPTOP = "full-1"  # where the account installs gpurig
ACCOUNT = "carol"
HOME = f"/home/{ACCOUNT}"
UV_VERSION, PIPX_VERSION = "0.13.9", "1.18.4"  # scripts/setup.sh's
# What the converge does on the target: a core-dump policy and a secret (the stage, upload and
# placement of a file as root, over SSH).
SECRET_DEST = "/root/.gpurig-install-test-token"
PLACED = f"/etc/profile.d/gpurig-core.sh {SECRET_DEST}"
# pyinfra's line for an operation that changed a host, and for one that did not (its log).
RESULT = re.compile(r"^\s*\[(?P<host>[^\]]+)\] (?P<result>Success|No changes)\s*$", re.M)


def mirrors() -> tuple[Path, Path]:
    lock = hashlib.sha256((REPO_ROOT / "uv.lock").read_bytes()).hexdigest()[:12]
    tools = f"tools-uv{UV_VERSION}-pipx{PIPX_VERSION}"
    found = (xdg_dir("XDG_CACHE_HOME", ".cache", f"wheelhouse-{lock}"),
             xdg_dir("XDG_CACHE_HOME", ".cache", tools))  # fmt: skip
    for path in found:
        assert path.is_dir(), f"{path}: run `sh scripts/setup.sh`"
    return found


def target(box: Sandbox) -> str:
    """The last fleet host: the one this module converges."""
    return [h.name for h in box.state.hosts.values() if h.kind == "fleet"][-1]


def target_entry(box: Sandbox, name: str) -> dict:
    """The target's inventory entry, with the sandbox's defaults (root, its client key)."""
    fleet = yaml.safe_load(box.paths.inventory.read_text())
    entry = fleet["hosts"][name]
    entry["ssh"] = {**fleet["defaults"]["ssh"], **entry.get("ssh", {})}
    entry.pop("groups", None)
    return entry


def as_account(host: object, command: str) -> object:
    return host.run(f"runuser -l {ACCOUNT} -c {shlex.quote(command)}")  # type: ignore[attr-defined]


def changed(output: str, host: str) -> int:
    return sum(1 for m in RESULT.finditer(output) if m["host"] == host and m["result"] == "Success")


@pytest.fixture(scope="module")
def laptop(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> object:
    """full-1 with a plain account holding a wheelhouse, uv's and pipx's wheels, the sandbox's
    client key and an inventory of the target; python3-venv installed by the host's root."""
    wheels_mirror, tools = mirrors()
    top = tmp_path_factory.mktemp("user-install")
    env = {**os.environ, "UV_OFFLINE": "1", "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1",
           "PIP_FIND_LINKS": str(wheels_mirror)}  # fmt: skip
    built = subprocess.run(["sh", "scripts/wheelhouse.sh", str(top / "wheels")], cwd=REPO_ROOT,
                           env=env, capture_output=True, text=True)  # fmt: skip
    assert built.returncode == 0, built.stderr
    subprocess.run(["cp", "-r", str(tools), str(top / "tools")], check=True)
    name = target(sandbox)
    entry = target_entry(sandbox, name)
    subprocess.run(["cp", os.path.expanduser(entry["ssh"]["key"]), str(top / "key")], check=True)
    entry["ssh"]["key"] = "~/.ssh/sandbox"
    entry["spec"] = {"engine": "none", "core_dumps": "disabled",
                     "secrets": [{"src": "~/token", "dest": SECRET_DEST}]}  # fmt: skip
    (top / "fleet.yaml").write_text(yaml.safe_dump({"version": 1, "hosts": {name: entry}}))
    (top / "token").write_text("s3cret-install-test\n")
    host = remote(sandbox, LAPTOP)
    host.check_output(
        f"userdel -r {ACCOUNT} 2>/dev/null; useradd -m -s /bin/bash {ACCOUNT} && "
        "{ python3 -c 'import ensurepip' 2>/dev/null || { apt-get update -qq && "
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; }; }"
    )
    packed = subprocess.run(["tar", "-C", str(top), "-cf", "-", "."], capture_output=True,
                            check=True).stdout  # fmt: skip
    ssh = ["ssh", "-F", str(sandbox.paths.ssh_config), LAPTOP,
           f"tar -C {HOME} -xf - && cd {HOME} && mkdir -p .ssh && mv key .ssh/sandbox && "
           f"chmod 600 .ssh/sandbox token && chown -R {ACCOUNT}: {HOME}"]  # fmt: skip
    subprocess.run(ssh, input=packed, check=True, timeout=120)
    # No sudo for this account, and nothing it runs may reach an index.
    assert as_account(host, "sudo -n true").rc != 0
    yield host
    host.run(f"userdel -r {ACCOUNT}")
    remote(sandbox, name).run(f"rm -f {PLACED}")


def test_a_plain_account_installs_and_converges_with_uv_and_pipx(
    sandbox: Sandbox, laptop: object
) -> None:
    name = target(sandbox)
    remote(sandbox, name).check_output(f"rm -f {PLACED}")
    tools = as_account(laptop, "python3 -m venv ~/.tools && ~/.tools/bin/pip install -q "
                       "--no-index --find-links ~/tools uv pipx")  # fmt: skip
    assert tools.rc == 0, tools.stderr
    installed = as_account(laptop, "PATH=$HOME/.tools/bin:$PATH && "
                           "uv tool install --no-index --find-links wheels gpurig")  # fmt: skip
    assert installed.rc == 0, installed.stderr
    gpurig = "PATH=$HOME/.local/bin:$PATH gpurig"
    version = as_account(laptop, f"{gpurig} --version")
    assert re.fullmatch(r"gpurig, version \S+\n", version.stdout), version.stdout + version.stderr
    valid = as_account(laptop, f"{gpurig} validate fleet.yaml")
    assert valid.rc == 0 and valid.stdout.startswith("OK: 1 host"), valid.stdout + valid.stderr
    first = as_account(laptop, f"{gpurig} converge fleet.yaml")
    assert first.rc == 0, first.stdout + first.stderr
    assert changed(first.stdout + first.stderr, name) > 0, first.stdout + first.stderr
    again = as_account(laptop, f"{gpurig} converge fleet.yaml")
    said = again.stdout + again.stderr
    assert again.rc == 0 and changed(said, name) == 0 and "No changes" in said, said
    drift = as_account(laptop, f"{gpurig} drift fleet.yaml")
    assert drift.rc == 0, drift.stdout + drift.stderr
    # pipx, beside it: its own home and bin, the same wheelhouse.
    pipx = as_account(laptop, "PATH=$HOME/.tools/bin:$PATH PIPX_HOME=$HOME/.pipx "
                      "PIPX_BIN_DIR=$HOME/.pipx-bin pipx install "
                      '--pip-args="--no-index --find-links wheels" gpurig')  # fmt: skip
    assert pipx.rc == 0, pipx.stdout + pipx.stderr
    checked = as_account(laptop, "$HOME/.pipx-bin/gpurig drift fleet.yaml")
    assert checked.rc == 0, checked.stdout + checked.stderr


def test_the_installed_converge_and_pyinfra_make_the_same_changes(
    sandbox: Sandbox, laptop: object, tmp_path: Path
) -> None:
    """The same drift (the converge's files removed) converged once by `gpurig converge` as the
    account and once by pyinfra from this checkout: the same operations change the host."""
    name = target(sandbox)
    host = remote(sandbox, name)
    entry = target_entry(sandbox, name)
    token = tmp_path / "token"
    token.write_text("s3cret-install-test\n")
    entry["spec"] = {"engine": "none", "core_dumps": "disabled",
                     "secrets": [{"src": str(token), "dest": SECRET_DEST}]}  # fmt: skip
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(yaml.safe_dump({"version": 1, "hosts": {name: entry}}))
    host.check_output(f"rm -f {PLACED}")
    ours = as_account(laptop, "PATH=$HOME/.local/bin:$PATH gpurig converge fleet.yaml")
    assert ours.rc == 0, ours.stdout + ours.stderr
    host.check_output(f"rm -f {PLACED}")
    theirs = subprocess.run(pyinfra_argv(), cwd=REPO_ROOT, env=inventory_env([inventory]),
                            capture_output=True, text=True, stdin=subprocess.DEVNULL)  # fmt: skip
    assert theirs.returncode == 0, theirs.stdout + theirs.stderr

    def results(output: str) -> list[str]:
        return [m["result"] for m in RESULT.finditer(output) if m["host"] == name]

    ours_said, theirs_said = ours.stdout + ours.stderr, theirs.stdout + theirs.stderr
    assert results(ours_said) == results(theirs_said), ours_said + theirs_said
    assert "Success" in results(ours_said)
