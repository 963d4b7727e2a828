"""Turn gpurig inventories into the groups a pyinfra inventory file exposes.

Host keys are always checked: recorded `host_key`s go into a known_hosts file gpurig writes,
hosts without one fall back to the user's own known_hosts, and nothing is accepted blindly.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpurig.remote import retry
from gpurig.spec.inventory import (
    Host,
    Inventory,
    InventoryError,
    Jump,
    Problem,
    SshSettings,
    load_inventory,
)
from gpurig.spec.tuples import asdict
from gpurig.spec.user_scope import is_user

ENV_VAR = "GPURIG_INVENTORY"
# pyinfra's name for gpurig.remote.jump.JumpConnector (pyproject.toml's entry point); not imported
# here, so the offline commands that read inventories load no paramiko.
JUMP_CONNECTOR = "gpurig_jump"
USER_KNOWN_HOSTS = "~/.ssh/known_hosts"

HostEntry = tuple[str, dict[str, Any]]


def inventory_paths(root: Path, environ: Mapping[str, str] | None = None) -> list[Path]:
    """Files named in $GPURIG_INVENTORY, else `inventories/*.yaml` (never the examples)."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "")
    named = [Path(p) for p in value.split(os.pathsep) if p]
    return named or sorted((root / "inventories").glob("*.yaml"))


def known_hosts_line(address: str, port: int, host_key: str) -> str:
    """One known_hosts line; OpenSSH and paramiko write non-22 ports as `[addr]:port`."""
    name = address if port == 22 else f"[{address}]:{port}"
    return f"{name} {host_key}"


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CACHE_HOME/gpurig`, else `~/.cache/gpurig`."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpurig"


def write_known_hosts(hosts: Iterable[Host], directory: Path) -> Path | None:
    """Write the recorded host keys to a file named by its content hash, atomically.

    Content-addressed, so concurrent runs with different inventories never overwrite each
    other's file and a reader never sees a half-written one. A file already there is used only
    when it holds exactly these keys: a shared or restored cache (a CI cache) must not supply
    other keys under the right name. None when no key is recorded.
    """
    lines = [
        known_hosts_line(h.address, h.ssh.port, h.ssh.host_key) for h in hosts if h.ssh.host_key
    ]
    if not lines:
        return None
    content = "".join(f"{line}\n" for line in lines)
    digest = hashlib.sha256(content.encode()).hexdigest()[:16]
    target = directory / f"known_hosts-{digest}"
    with contextlib.suppress(OSError):  # missing, unreadable or a directory: written anew
        if not target.is_symlink() and target.read_text(encoding="utf-8") == content:
            return target
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".known_hosts-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
    return target


def host_data(host: Host, known_hosts: Path | None) -> dict[str, Any]:
    """pyinfra host data: SSH settings with strict host key checking, plus the merged spec."""
    data: dict[str, Any] = {
        "ssh_hostname": host.address,
        "ssh_port": host.ssh.port,
        "ssh_strict_host_key_checking": "yes",
        "ssh_known_hosts_file": str(known_hosts)
        if host.ssh.host_key and known_hosts
        else USER_KNOWN_HOSTS,
        "spec": host.spec,
        "gpurig_groups": list(host.groups),
    }
    if host.ssh.user:
        data["ssh_user"] = host.ssh.user
    if host.ssh.user not in (None, "root") and not is_user(host.spec):
        # pyinfra reads global arguments from host data: a non-root login works through
        # passwordless sudo (what onboard's preflight insists on), unless the spec says it
        # acts as that user alone (scope: user), where sudo is never tried.
        data["_sudo"] = True
    if host.ssh.key:
        data["ssh_key"] = os.path.expanduser(host.ssh.key)
    if host.ssh.connect_timeout:
        data["ssh_connect_timeout"] = host.ssh.connect_timeout
        # pyinfra 3.10 has no per-host connect timeout key; paramiko's kwargs carry it.
        data["ssh_paramiko_connect_kwargs"] = {"timeout": host.ssh.connect_timeout}
    if host.ssh.jump:
        data["gpurig_jump"] = jump_data(host.ssh.jump)
    return data


def jump_data(jump: Jump) -> dict[str, Any]:
    """The login node as gpurig.remote.jump takes it (a plain mapping: it keys the shared login)."""
    return {**asdict(jump), "key": os.path.expanduser(jump.key) if jump.key else None}


def pyinfra_name(host: Host) -> str:
    """The name pyinfra is given: `@gpurig_jump/NAME` for a host behind a login node (that
    connector names it NAME again), else NAME."""
    return f"@{JUMP_CONNECTOR}/{host.name}" if host.ssh.jump else host.name


def pyinfra_hosts(hosts: Sequence[Host], known_hosts_dir: Path) -> list[HostEntry]:
    """(name, data) for pyinfra, in order, each host's recorded key in a known_hosts file.

    One file per network: the hosts behind each login node get their own, since private
    addresses repeat from one cluster to the next (and match a directly reached host's).
    """
    networks: dict[Jump | None, list[Host]] = {}
    for host in hosts:
        networks.setdefault(host.ssh.jump, []).append(host)
    files = {
        jump: write_known_hosts(members, known_hosts_dir) for jump, members in networks.items()
    }
    return [(pyinfra_name(h), host_data(h, files[h.ssh.jump])) for h in hosts]


def pyinfra_groups(
    inventory: Inventory, known_hosts_dir: Path, retries: int = retry.RETRIES
) -> dict[str, list[Any]]:
    """`all` as (name, data) tuples in file order, plus one list of names per YAML group;
    pyinfra tries a host that blinked `retries` more times (gpurig.remote.retry)."""
    again = retry.pyinfra_data(retries)
    entries = pyinfra_hosts(inventory.hosts, known_hosts_dir)
    hosts = [(name, {**data, **again}) for name, data in entries]
    groups: dict[str, list[Any]] = {"all": hosts}
    groups.update(inventory.groups())
    return groups


def load_groups(root: Path) -> dict[str, list[Any]]:
    """Everything `inventory.py` needs; raises InventoryError before any host is contacted,
    also where there is no inventory at all (a run that converges nothing must not pass)."""
    paths = inventory_paths(root)
    if not paths:
        looked = root / "inventories" / "*.yaml"
        raise InventoryError([Problem(str(looked), None, (), (
            f"no inventory: {ENV_VAR} is not set and no file matches; write one there (the "
            f"examples in {root / 'inventories' / 'examples'} are never read) or set "
            f"{ENV_VAR}=FILE[{os.pathsep}FILE...]"
        ))])  # fmt: skip
    return pyinfra_groups(load_inventory(paths), cache_dir(), retry.from_env())


def _ssh_block(name: str, address: str, port: int, user: str | None, key: str | None,
               known_hosts: Path | None, jump: str | None = None) -> str:  # fmt: skip
    lines = [f"Host {name}", f"  HostName {address}", f"  Port {port}"]
    if user:
        lines.append(f"  User {user}")
    if key:  # ~ from $HOME, as the converge and drift read it (OpenSSH: the passwd home)
        lines += [f'  IdentityFile "{os.path.expanduser(key)}"', "  IdentitiesOnly yes"]
    lines.append(f'  UserKnownHostsFile "{known_hosts or USER_KNOWN_HOSTS}"')
    lines.append("  StrictHostKeyChecking yes")
    if jump:
        lines.append(f"  ProxyJump {jump}")
    return "\n".join(lines) + "\n"


def ssh_config(hosts: Sequence[Host], known_hosts_dir: Path) -> str:
    """ssh_config(5) for `hosts`, so plain ssh and testinfra's `ssh://` backend reach them as
    gpurig does: each host key checked against the recorded ones (written as drift writes
    them), a host behind a login node through that node (`gpurig-login-N-ADDRESS`), whose key
    is pinned too."""
    blocks, logins = [], {}
    networks: dict[Jump | None, list[Host]] = {}
    for host in hosts:
        networks.setdefault(host.ssh.jump, []).append(host)
    for jump, members in networks.items():
        known = write_known_hosts(members, known_hosts_dir)
        via = None
        if jump:
            via = f"gpurig-login-{len(logins) + 1}-{jump.address}"  # one per jump setting
            pinned = SshSettings(port=jump.port, host_key=jump.host_key)
            login = Host(via, jump.address, pinned, (), {}, "", 0)
            logins[via] = _ssh_block(via, jump.address, jump.port, jump.user, jump.key,
                                     write_known_hosts([login], known_hosts_dir))  # fmt: skip
        for h in members:
            blocks.append(
                _ssh_block(h.name, h.address, h.ssh.port, h.ssh.user, h.ssh.key, known, via)
            )
    return "\n".join([*blocks, *logins.values()])
