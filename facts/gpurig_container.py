"""Facts about containers and the host's CPUs, for the container operation."""

from __future__ import annotations

import json
import shlex
from typing import Any

from pyinfra.api import FactBase

from gpurig.user_scope import CONTAINER_HOST


class ContainerInspect(FactBase):
    """`ENGINE inspect NAME` as a dict, or None when there is no such container."""

    def command(self, engine: str, container: str) -> str:
        return f"{engine} container inspect {shlex.quote(container)} 2>/dev/null || true"

    def process(self, output: list[str]) -> dict[str, Any] | None:
        text = "\n".join(output).strip()
        if not text:
            return None
        data = json.loads(text)
        return data[0] if data else None


class UserContainerInspect(ContainerInspect):
    """ContainerInspect through the user's Podman API socket (scope: user)."""

    def command(self, engine: str, container: str) -> str:
        return f"{CONTAINER_HOST} {super().command(engine, container)}"


class CpuQuota(FactBase):
    """CPUs this host may use: its cgroup quota (v2 or v1) when set, else `nproc`."""

    def command(self) -> str:
        return (
            "n=$(nproc); q=; "
            "if [ -r /sys/fs/cgroup/cpu.max ]; then read q p < /sys/fs/cgroup/cpu.max; "
            "elif [ -r /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then "
            "q=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us); "
            "p=$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us); fi; "
            'case "$q" in ""|max|-1) echo "$n";; *) echo $(( (q + p - 1) / p ));; esac'
        )

    def process(self, output: list[str]) -> int:
        return max(1, int(output[0]))
