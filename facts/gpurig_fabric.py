"""The fabric fact: RDMA ports (InfiniBand, RoCE) with their state, rate and error counters,
the RDMA devices' firmware, model and network devices, and every network interface's MTU and
state, all from sysfs in one bounded shell (builtins only: no process per file). Batched into
the host's one round trip; the parser is gpurig.read.fabric_parse."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpurig.facts.round_trip import BOUNDED, Sectioned
from gpurig.read import fabric_parse

_IB = "/sys/class/infiniband/*"
# Every file the fabric's checks and the fleet view judge, as shell globs.
_GLOBS = (
    *(f"{_IB}/{name}" for name in fabric_parse.DEVICE_FILES),
    *(f"{_IB}/ports/*/{name}" for name in fabric_parse.PORT_FILES),
    *(f"{_IB}/ports/*/counters/{name}" for name in fabric_parse.COUNTERS),
    *(f"/sys/class/net/*/{name}" for name in fabric_parse.NET_FILES),
    f"{_IB}/device/net/*",
)
# At most this many paths (a host with 16 dual-port HCAs and 64 interfaces reads ~560): a
# host that lists more is cut short, never read without end.
PATHS_MAX = 4096

# One `sh` under `bounded` (a wedged HCA can block a counter read in its driver): `read` and
# `printf` are builtins, so no file costs a process. The first line of each file; a network
# device under an RDMA device prints its path alone. No single quote inside (the script is
# one shell word).
_SCRIPT = f"""n=0
for f in {" ".join(_GLOBS)}; do
  n=$((n + 1)); [ "$n" -le {PATHS_MAX} ] || break
  case $f in */device/net/*) [ -e "$f" ] && printf "%s\\t\\n" "$f"; continue;; esac
  [ -f "$f" ] || continue
  v=; {{ IFS= read -r v || [ -n "$v" ]; }} 2>/dev/null <"$f" || continue
  printf "%s\\t%s\\n" "$f" "$v"
done"""


class Fabric(Sectioned[dict[str, Any]]):
    """{"hcas": {...}, "interfaces": {...}} (gpurig.read.fabric_parse.parse_fabric); empty
    where the host has no RDMA device (and no /sys/class/net: a host without sysfs)."""

    def command(self) -> str:
        return self.sectioned({"sysfs": f"{BOUNDED}\nbounded sh -c '{_SCRIPT}'"})

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        return fabric_parse.parse_fabric(parts.get("sysfs") or "")
