"""Facts about containers and the host's CPUs, for the container plan and the checks."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from typing import Any, Optional

from gpurig.facts.round_trip import BOUNDED, Sectioned, section
from gpurig.read import node_parse
from gpurig.spec.user_scope import CONTAINER_HOST

# The OOM kill count of process $1's memory cgroup, found in /proc/PID/cgroup (`0::PATH` on
# v2, the line naming the memory controller on v1).
_OOM_KILL_OF = r"""oom_kill_of() {
  case $1 in '' | 0 | *[!0-9]*) return ;; esac
  if [ -r /sys/fs/cgroup/cgroup.controllers ]; then
    path=$(sed -n 's/^0:://p' "/proc/$1/cgroup" 2>/dev/null)
    [ -n "$path" ] && sed -n 's/^oom_kill //p' "/sys/fs/cgroup$path/memory.events" 2>/dev/null
  else
    path=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}memory\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p' \
      "/proc/$1/cgroup" 2>/dev/null)
    [ -n "$path" ] && sed -n 's/^oom_kill //p' "/sys/fs/cgroup/memory$path/memory.oom_control" \
      2>/dev/null
  fi
}"""
# The main process's pid as the engine's inspect prints it (`"Pid": 1234,`); process() keeps
# the count only when that pid is the one the parsed document holds.
_PID_LINE = r"""s/^[[:space:]]*"Pid":[[:space:]]*\([0-9][0-9]*\),\{0,1\}[[:space:]]*$/\1/p"""


class ContainerInspect(Sectioned[dict[str, Any]]):
    """`ENGINE container inspect NAME` as a dict (`inspect`: None when there is no such
    container), and the OOM kills counted in its main process's memory cgroup (`oom_kill`:
    None when it is not running or the count cannot be read). The one read of a container's
    state: its running state and pid come from here. The count follows the document under
    the run's nonce (facts.round_trip), which nothing the container's owner puts in its
    fields can print."""

    def command(self, engine: str, container: str) -> str:
        oom = section("part", "oom", 'printf \'%s %s\\n\' "$pid" "$(oom_kill_of "$pid")"')
        return self.sectioned({
            "inspect": (
                f"out=$({engine} container inspect {shlex.quote(container)} 2>/dev/null) || "
                "exit 0\nprintf '%s\\n' \"$out\"\n"
                f"pid=$(printf '%s\\n' \"$out\" | sed -n '{_PID_LINE}' | sed -n 1p)\n"
                f"{_OOM_KILL_OF}\n{oom}"
            )
        })  # fmt: skip

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        text = (parts.get("inspect") or "").strip()
        data = json.loads(text) if text else []
        if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
            raise ValueError("container inspect printed something other than a list of objects")
        inspect = data[0] if data else None
        oom_kill = None
        if "oom" in parts and inspect is not None:
            pid, _, count = (parts["oom"].strip().split("\n") or [""])[0].partition(" ")
            if pid and pid == str((inspect.get("State") or {}).get("Pid")):
                oom_kill = node_parse.count(count)
        return {"inspect": inspect, "oom_kill": oom_kill}


class ThroughUserSocket:
    """A container fact run through the user's Podman API socket (scope: user): a second,
    local podman would join the service's namespace and break it."""

    # Named arguments, as the facts it wraps take them: pyinfra reads a fact's by its signature.
    def command(self, engine: str | None = None, container: str | None = None) -> str:
        return f"export {CONTAINER_HOST}\n{super().command(engine, container)}"  # type: ignore[misc]


class UserContainerInspect(ThroughUserSocket, ContainerInspect):
    """ContainerInspect through the user's Podman API socket."""


# torch inside a running container, printed as JSON by the container's own python3 after a
# word of its own: Docker prints why an exec failed (no python3 in the image) on stdout.
TORCH_LINE = "gpurig-torch "
TORCH_PY = f"""import json
try:
    import torch
except Exception:
    print({TORCH_LINE!r} + json.dumps(None))
else:
    print({TORCH_LINE!r} + json.dumps({{"version": torch.__version__, "cuda": torch.version.cuda,
                                       "arch_list": torch.cuda.get_arch_list()}}))"""


class ContainerTorch(Sectioned[Optional[dict[str, Any]]]):
    """The torch build inside a running container ({version, cuda, arch_list}; None: not
    running, no python3 or no torch), asked of the container's own python3. What else the
    exec prints (the engine's reason it could not run python3) is not torch's answer."""

    def command(self, engine: str, container: str) -> str:
        run = f"{engine} exec {shlex.quote(container)} python3 -c {shlex.quote(TORCH_PY)}"
        return self.sectioned({"torch": f"{BOUNDED}\nbounded {run} 2>/dev/null"})

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any] | None:
        answers = [
            line[len(TORCH_LINE) :]
            for line in (parts.get("torch") or "").splitlines()
            if line.startswith(TORCH_LINE)
        ]
        if not answers:
            return None
        torch = json.loads(answers[-1])
        if torch is not None and not (
            isinstance(torch, dict) and isinstance(torch.get("arch_list", []), list)
        ):
            raise ValueError(f"not torch's build info: {answers[-1][:120]!r}")
        return torch


class CpuQuota(Sectioned[dict[str, Any]]):
    """The CPUs this host may use: `nproc`, and the cgroup's CPU quota as a number of CPUs
    (v2 cpu.max or v1 cfs quota/period; None: no quota)."""

    def command(self) -> str:
        return self.sectioned({
            "nproc": "nproc 2>/dev/null",
            "quota": "if [ -r /sys/fs/cgroup/cpu.max ]; then cat /sys/fs/cgroup/cpu.max; "
                     "elif [ -r /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then "
                     "echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us "
                     "/sys/fs/cgroup/cpu/cpu.cfs_period_us); fi 2>/dev/null",
        })  # fmt: skip

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        nproc, quota = (parts.get("nproc") or "").strip(), (parts.get("quota") or "").strip()
        if nproc and not nproc.isdigit():
            raise ValueError(f"nproc printed {nproc[:40]!r}")
        match = re.fullmatch(r"(max|-1|[0-9]+) ([0-9]+)", quota)
        if quota and match is None:
            raise ValueError(f"not a CPU quota and period: {quota[:40]!r}")
        limited = match is not None and match[1] not in ("max", "-1") and int(match[2]) > 0
        return {
            "nproc": int(nproc) if nproc else None,
            "cpus": int(match[1]) / int(match[2]) if limited else None,
        }


class UserContainerTorch(ThroughUserSocket, ContainerTorch):
    """ContainerTorch through the user's Podman API socket."""


# Each container fact's scope: user variant (gpurig.plans.containers.container_reads).
USER_SOCKET: dict[type, type] = {
    ContainerInspect: UserContainerInspect,
    ContainerTorch: UserContainerTorch,
}
