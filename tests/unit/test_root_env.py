"""Root starts from nothing of the caller's: what the node contracts and `ack` start as root
(and `up --local` for a system spec: tests/unit/test_up.py) gets an environment built from an
allow-list (gpurig.root_env), whatever the caller's holds (sudo's SUDO_UID, BROWSER with
PYTHONWARNINGS, GCONV_PATH, APT_CONFIG...)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpurig.root_env import OWN, ROOT_PATH, allowed

CALLERS = {
    "SUDO_UID": "1001", "BROWSER": "/home/alice/run %s",
    "PYTHONWARNINGS": "all:0:antigravity.x:0:0",
    "GCONV_PATH": "/home/alice/gconv", "APT_CONFIG": "/home/alice/apt.conf", "PERL5OPT": "-Mx",
    "PIP_CONFIG_FILE": "/home/alice/pip.conf", "UV_CONFIG_FILE": "/home/alice/uv.toml",
    "LD_PRELOAD": "/home/alice/x.so", "PYTHONPATH": "/home/alice", "BASH_ENV": "/home/alice/rc",
    "HOME": "/home/alice", "PATH": "/home/alice/bin:/usr/bin", "A_NAME_NOBODY_LISTED": "x",
}  # fmt: skip
PRINTS = {"LANG": "C.UTF-8", "LC_ALL": "C", "TZ": "UTC", "TERM": "dumb"}


def test_only_the_allow_list_passes() -> None:
    env = allowed({**CALLERS, **PRINTS, "SLURMD_NODENAME": "n1"}, "/root", OWN)
    assert env == {**PRINTS, "PATH": ROOT_PATH, "HOME": "/root", "SLURMD_NODENAME": "n1"}
    assert "SLURMD_NODENAME" not in allowed({"SLURMD_NODENAME": "n1"}, "/root")


# The environment each command sees once the console script has started it: the command
# itself replaced by a dump of os.environ (a node contract's run, or click's for `ack`).
DUMP = """
import json, os, sys
import gpurig.cli.main, gpurig.node.argv
def dump(*args, **kwargs):
    print(json.dumps(dict(os.environ)))
    return 0
gpurig.node.argv.run = gpurig.cli.main.main = dump
sys.argv = ["gpurig", *sys.argv[1:]]
from gpurig.cli.entry import main
main()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the environment is scrubbed as root")
@pytest.mark.parametrize(
    "argv",
    [
        ["drift", "--local", "--spec", "SPEC", "--mode", "npd"],
        ["ack", "--all"],
    ],
)
def test_what_root_starts_on_a_node_sees_only_the_allow_list(argv: list[str], tmp_path) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text("core_dumps: disabled\n")
    argv = [str(spec) if word == "SPEC" else word for word in argv]
    env = {**CALLERS, **PRINTS, "PYTHONPATH": os.getcwd()}
    said = subprocess.run([sys.executable, "-c", DUMP, *argv], capture_output=True, text=True,
                          env=env, check=True)  # fmt: skip
    seen = json.loads(said.stdout.splitlines()[-1])
    assert seen == {**PRINTS, "PATH": ROOT_PATH, "HOME": "/root"}


@pytest.mark.skipif(os.geteuid() != 0, reason="the environment is scrubbed as root")
def test_a_connecting_command_keeps_the_callers_environment(tmp_path) -> None:
    """drift over SSH needs the caller's agent (SSH_AUTH_SOCK) and HOME: nothing it starts
    runs here as root."""
    said = subprocess.run([sys.executable, "-c", DUMP, "drift", "fleet.yaml"], text=True,
                          capture_output=True, env={**CALLERS, "PYTHONPATH": os.getcwd()},
                          check=True)  # fmt: skip
    seen = json.loads(said.stdout.splitlines()[-1])
    assert seen["SUDO_UID"] == "1001" and seen["HOME"] == "/home/alice"
