"""Every start or restart gpurig issues clears systemd's failed state first: after a few
daemon.json changes within a minute, docker hit its start limit (`start-limit-hit`) and the
converge failed until someone ran `systemctl reset-failed` by hand."""

from __future__ import annotations

from gpurig.deploys.engine import start_unit, write_daemon_json
from gpurig.plans.change import Change


def test_start_and_restart_reset_the_failed_state_first():
    for command in (start_unit("docker"), start_unit("docker", restart=True)):
        reset, _, rest = command.partition(";")
        assert reset.strip() == "systemctl reset-failed docker 2>/dev/null"
        assert "systemctl enable docker" in rest


def test_daemon_json_changes_write_once_and_restart_once():
    wanted = {"insecure-registries": ["10.0.0.5:5000"], "runtimes": {"nvidia": {}}}
    changes = [
        Change(i, "daemon.json", "x", "y", "set", data={"daemon_json": wanted})
        for i in ("engine.insecure_registries", "toolkit.runtime")
    ]
    commands = [str(c) for c in write_daemon_json(changes)]
    assert sum("restart docker" in c for c in commands) == 1
    assert sum("reset-failed" in c for c in commands) == 1
