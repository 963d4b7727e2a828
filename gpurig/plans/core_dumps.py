"""Core dumps off (`core_dumps: disabled`): a crashing trainer must not fill the disk with
multi-GB core files (40 GB each from a SIGBUS-ing trainer filled a root disk)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpurig.facts.gpurig_user import LoginProfile
from gpurig.plans.change import Change
from gpurig.plans.files import managed
from gpurig.plans.profile import block
from gpurig.spec.user_scope import is_user

# pam_limits reads limits.d for sessions that go through PAM; `*` does not cover root.
LIMITS = "# Managed by gpurig: no core dumps.\n*    -    core    0\nroot -    core    0\n"
# Login shells that bypass PAM (sshd with UsePAM no, containers) still get the limit.
PROFILE = "# Managed by gpurig: no core dumps.\nulimit -S -c 0 2>/dev/null || true\n"
# Services started by systemd inherit this default.
SYSTEMD = "# Managed by gpurig: no core dumps.\n[Manager]\nDefaultLimitCORE=0\n"

MANAGED_FILES = {
    "/etc/security/limits.d/90-gpurig-core.conf": LIMITS,
    "/etc/profile.d/gpurig-core.sh": PROFILE,
    "/etc/systemd/system.conf.d/90-gpurig-core.conf": SYSTEMD,
}


def plan(spec: Mapping[str, Any], read: Callable[..., Any]) -> list[Change]:
    disabled = spec["core_dumps"] == "disabled"
    if is_user(spec):  # the user's own login shells; limits.d and systemd are root's
        lines = [PROFILE.splitlines()[-1]] if disabled else None
        return block("core_dumps.profile", "core_dumps", lines, read(LoginProfile))
    wanted = {path: content if disabled else None for path, content in MANAGED_FILES.items()}
    return managed("core_dumps.file", wanted, read)
