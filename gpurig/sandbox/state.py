"""The sandbox's own records: what it made, written *before* making it; and the index of
named sandboxes, one entry per name under the XDG state directory."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpurig.fsutil import atomic_write, xdg_dir
from gpurig.sandbox.alloc import Allocation, check_name
from gpurig.sandbox.proc import SandboxError
from gpurig.sandbox.rootfs import DEFAULT_RELEASE

STATE_VERSION = 2
DEFAULT_NAME = "default"


def index_dir() -> Path:
    """One entry per sandbox name: the sandbox's directory, or a link to one made by --dir."""
    return xdg_dir("XDG_STATE_HOME", ".local/state", "sandboxes")


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
    via: str = ""  # the login node (a host's name) that is the only way to this host
    role: str = ""  # a full host's part in the sandbox's SLURM: "slurmctld" | "slurmd"
    volumes: list[str] = field(default_factory=list)  # a full host's extra bind mounts
    release: str = DEFAULT_RELEASE  # the Debian suite its rootfs was made from


@dataclass
class State:
    """Everything `up` made, so `down` can remove exactly that, even after a killed run.
    The allocation fields (name ... ports) are what the sandbox owns on the machine."""

    name: str = ""
    slot: int | None = None
    bridge: str = ""
    network: str = ""
    gateway: str = ""
    podman_network: str = ""
    podman_subnet: str = ""
    podman_interface: str = ""
    ports: dict[str, int] = field(default_factory=dict)  # service name -> TCP port
    # service name -> [pid, start time] of the server the sandbox started
    services: dict[str, list[int | None]] = field(default_factory=dict)
    images: dict[str, str] = field(default_factory=dict)  # name -> reference by digest
    local_image: str = ""  # the train image as Podman here holds it before the push
    hosts: dict[str, HostRecord] = field(default_factory=dict)
    users: list[str] = field(default_factory=list)  # cluster users on full-1 (sandbox.users)
    # The SLURM cluster `up --slurm` made and found ready: controller, nodes, user, shared dir.
    slurm: dict[str, Any] = field(default_factory=dict)

    def releases(self, kind: str) -> list[str]:
        """The releases this sandbox's hosts of `kind` run, each once."""
        return sorted({h.release for h in self.hosts.values() if h.kind == kind})

    def fleet(self) -> list[HostRecord]:
        return [h for h in self.hosts.values() if h.kind == "fleet"]

    def full(self) -> list[HostRecord]:
        return [h for h in self.hosts.values() if h.kind == "full"]

    def allocate(self, alloc: Allocation) -> None:
        for key, value in asdict(alloc).items():
            setattr(self, key, value)

    def endpoint(self, service: str) -> tuple[str, int]:
        """Where `service` (registry, aptrepo, git) listens for this sandbox's hosts."""
        return self.gateway, self.ports[service]


def load(path: Path) -> State:
    if not path.exists():
        return State()
    raw = json.loads(path.read_text())
    # Fields this gpurig does not know (records of a newer one, read when choosing a slot
    # beside its sandbox) are left out, not a crash.
    fields = HostRecord.__dataclass_fields__
    hosts = {
        name: HostRecord(**{k: v for k, v in rec.items() if k in fields})
        for name, rec in raw.pop("hosts", {}).items()
    }
    raw.pop("version", None)
    known = State.__dataclass_fields__
    return State(hosts=hosts, **{k: v for k, v in raw.items() if k in known})


def save(path: Path, state: State) -> None:
    data = {"version": STATE_VERSION, **asdict(state)}
    atomic_write(path, json.dumps(data, indent=2, sort_keys=True) + "\n", mode=0o600)


def locate(name: str | None, top: Path | None) -> tuple[str, Path]:
    """The sandbox that --name and --dir designate: (name, directory). --dir (or
    $GPURIG_SANDBOX_DIR) wins; its name is the one recorded there, else --name, else the
    directory's own name. Without --dir the sandbox lives in the index under its name
    (--name, else $GPURIG_SANDBOX, else `default`)."""
    if top is None and name is None and os.environ.get("GPURIG_SANDBOX_DIR"):
        top = Path(os.environ["GPURIG_SANDBOX_DIR"])
    if top is None:
        name = check_name(name or os.environ.get("GPURIG_SANDBOX") or DEFAULT_NAME)
        return name, index_dir() / name
    recorded = load(top / "state.json").name
    if recorded and name and recorded != name:
        raise SandboxError(f"{top} holds the sandbox {recorded!r}, not {name!r}")
    chosen = recorded or name or top.name
    try:
        return check_name(chosen), top
    except SandboxError as e:
        raise SandboxError(f"{e} (derived from --dir {top}: give --name)") from None


def registered() -> dict[str, Path]:
    """Name -> directory of every sandbox in the index that has records."""
    top = index_dir()
    found = {}
    for entry in sorted(top.iterdir()) if top.is_dir() else []:
        if (entry / "state.json").is_file():
            found[entry.name] = entry.resolve()
    return found


def register(name: str, top: Path) -> None:
    """Put a sandbox made with --dir elsewhere into the index, as a link to its directory."""
    entry = index_dir() / name
    if entry.resolve() == top.resolve():
        return
    if entry.is_symlink() and not (entry / "state.json").exists():
        entry.unlink()  # a link left by a sandbox whose directory is gone
    if entry.exists() or entry.is_symlink():
        raise SandboxError(f"a sandbox named {name!r} already lives at {entry.resolve()}")
    entry.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(top.resolve(), entry)


def unregister(name: str, top: Path) -> None:
    entry = index_dir() / name
    if entry.is_symlink() and entry.resolve() == top.resolve():
        entry.unlink()
