"""Core dumps off (`spec.core_dumps: disabled`): a crashing trainer must not fill the disk
with multi-GB core files (field notes: 000, 003 U-series)."""

from __future__ import annotations

from io import StringIO
from typing import Any

from pyinfra.api import deploy
from pyinfra.operations import files

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


@deploy("Core dumps")
def core_dumps(spec: dict[str, Any]) -> None:
    present = spec.get("core_dumps", "disabled") == "disabled"
    for path, content in MANAGED_FILES.items():
        if present:
            files.put(name=f"Write {path}", src=StringIO(content), dest=path, mode="644")
        else:
            files.file(name=f"Remove {path}", path=path, present=False)
