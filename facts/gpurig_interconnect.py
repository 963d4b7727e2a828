"""The PCIe interconnect between a host's GPUs: which bridges have Access Control Services
controls on (`lspci -vvv`'s ACSCtl lines), which NCCL's troubleshooting guide says break or slow
GPU peer-to-peer. One small part of the host's one round trip; the parser is
gpurig.read.interconnect_parse's, tested on recordings from real machines."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpurig.facts.round_trip import BOUNDED, Sectioned
from gpurig.read import interconnect_parse
from gpurig.spec.tuples import asdict

# A multi-GPU host prints a few thousand lines of `lspci -vvv`; only device, bridge bus range
# and ACSCtl lines are kept, and at most this many.
MAX_LINES = 2000


class PcieAcs(Sectioned[dict[str, Any]]):
    """{"controls": [{"device", "enabled", "below"}], "peers": [GPUs and RDMA NICs]}: the ACSCtl
    lines of `lspci -vvv` and what sits below each bridge (by its bus range), read only where
    the NVIDIA driver is loaded (no GPU, no peer-to-peer to break) and lspci is installed.
    Without root lspci prints no capabilities ('<access denied>'): `denied` says so, and no
    control is reported rather than any guessed."""

    def command(self) -> str:
        return self.sectioned({
            "acs": f"{BOUNDED}\nif [ -e /proc/driver/nvidia/version ] && "
                   "command -v lspci >/dev/null 2>&1; then\n"
                   "bounded lspci -vvv 2>/dev/null | sed -n -e '/^[0-9a-fA-F]/p' "
                   "-e '/^[[:space:]]*Bus: primary=/p' -e '/^[[:space:]]*ACSCtl:/p' "
                   "-e '/^[[:space:]]*Capabilities: <access denied>/p' "
                   f"| head -n {MAX_LINES}\nfi",
        })  # fmt: skip

    @staticmethod
    def parse(parts: Mapping[str, str]) -> dict[str, Any]:
        text = parts.get("acs") or ""
        controls, peers = interconnect_parse.parse_acs_controls(text)
        return {
            "controls": [asdict(c) for c in controls],
            "peers": peers,
            "denied": "<access denied>" in text,
        }
