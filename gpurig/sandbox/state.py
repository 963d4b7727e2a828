"""The sandbox's own records: what it made, written *before* making it."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpurig.fsutil import atomic_write, xdg_dir

STATE_VERSION = 1


def default_dir() -> Path:
    """Where the sandbox keeps its records, keys, overlays and inventory."""
    env = os.environ.get("GPURIG_SANDBOX_DIR")
    return Path(env) if env else xdg_dir("XDG_STATE_HOME", ".local/state", "sandbox")


@dataclass
class HostRecord:
    """One sandbox host. `pid`/`started` identify a fleet host's namespace init process."""

    name: str
    kind: str  # "fleet" | "full"
    index: int
    address: str = ""
    host_key: str = ""
    netns: str = ""
    veth: str = ""
    container: str = ""
    pid: int | None = None
    started: int | None = None


@dataclass
class State:
    """Everything `up` made, so `down` can remove exactly that, even after a killed run."""

    bridge: str = ""
    gateway: str = ""
    # service name -> [pid, start time] of the server the sandbox started
    services: dict[str, list[int | None]] = field(default_factory=dict)
    podman_network: str = ""
    images: dict[str, str] = field(default_factory=dict)  # name -> reference by digest
    hosts: dict[str, HostRecord] = field(default_factory=dict)

    def fleet(self) -> list[HostRecord]:
        return [h for h in self.hosts.values() if h.kind == "fleet"]

    def full(self) -> list[HostRecord]:
        return [h for h in self.hosts.values() if h.kind == "full"]


def load(path: Path) -> State:
    if not path.exists():
        return State()
    raw = json.loads(path.read_text())
    hosts = {name: HostRecord(**rec) for name, rec in raw.pop("hosts", {}).items()}
    raw.pop("version", None)
    return State(hosts=hosts, **raw)


def save(path: Path, state: State) -> None:
    data = {"version": STATE_VERSION, **asdict(state)}
    atomic_write(path, json.dumps(data, indent=2, sort_keys=True) + "\n", mode=0o600)
