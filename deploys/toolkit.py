"""The NVIDIA Container Toolkit (`nvidia_toolkit`): key, repository, pin, packages at one
version and held, and for Podman the CDI spec; Docker's runtime key is written with the
engine's daemon.json (deploys/engine.py)."""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra.api import deploy, operation

from gpurig.deploys.changes import apply
from gpurig.deploys.core_dumps import write
from gpurig.deploys.packages import apt, apt_get, apt_install, install
from gpurig.deploys.snapshot import read
from gpurig.facts.gpurig_toolkit import CDI_MARKER
from gpurig.plans import toolkit as plan
from gpurig.plans.change import Change
from gpurig.plans.toolkit import CDI_SPEC, KEYRING, KEYRING_RECORD, packages
from gpurig.spec.model import toolkit_wanted


def check_fingerprint(key: str, fingerprint: str, url: str) -> str:
    """Shell words that succeed only when the keyring file `key` (gpg home: $tmp) holds exactly
    one primary key, the pinned one; otherwise they say what was found, on stderr."""
    pinned = fingerprint.upper()
    refused = shlex.quote(f"gpurig: the key from {url} is not the one key_fingerprint pins "
                          f"({pinned}); found:")  # fmt: skip
    return (
        f'{{ found=$(gpg --batch --homedir "$tmp" --with-colons --show-keys {key} 2>/dev/null | '
        'awk -F: \'$1 == "pub" { p = 1; next } p && $1 == "fpr" { print $10; p = 0 }\' '
        f'| tr "\\n" " " | sed "s/ $//") && [ "$found" = {pinned} ] || '
        f'{{ echo {refused} "${{found:-no key}}" >&2; false; }}; }}'
    )


def fetch_key(url: str, fingerprint: str | None) -> list[str]:
    """Download and dearmor the key in a private gpg home (root's keyrings stay untouched),
    check it is the pinned one (where pinned), rename it into place, then record its URL and
    sha256 so a later run need not fetch it."""
    q_url, q_path, q_record = shlex.quote(url), shlex.quote(KEYRING), shlex.quote(KEYRING_RECORD)
    new = shlex.quote(f"{KEYRING}.gpurig-new")
    key = '"$tmp/key.gpg"'
    check = f"{check_fingerprint(key, fingerprint, url)} && " if fingerprint else ""
    return [
        f'tmp=$(mktemp -d) && curl -fsSL --retry 3 -o "$tmp/key" {q_url} && '
        f'gpg --batch --homedir "$tmp" --dearmor -o "$tmp/key.gpg" "$tmp/key" && {check}'
        f'install -m 644 "$tmp/key.gpg" {new} && mv -f {new} {q_path}; '
        'rc=$?; gpgconf --homedir "$tmp" --kill all 2>/dev/null; rm -rf "$tmp"; exit $rc',
        f"mkdir -p $(dirname {q_record}) && "
        f"echo \"$(sha256sum < {q_path} | cut -d' ' -f1) \"{q_url} > {q_record}.new && "
        f"mv -f {q_record}.new {q_record}",
    ]


def install_pinned(version: str) -> list[str]:
    pins = " ".join(shlex.quote(f"{name}={version}") for name in packages())
    arguments = f"--allow-downgrades --allow-change-held-packages -- {pins}"
    return [apt_get("update -q"), apt_install(arguments, f"the toolkit {version}")]


def generate_cdi(driver: str) -> str:
    """Generate the CDI spec outside /etc/cdi (which Podman reads), mark it with the driver it
    was made for (the spec names the driver's library files), then rename it into place."""
    q_path, marker = shlex.quote(CDI_SPEC), shlex.quote(f"{CDI_MARKER}{driver}")
    return (
        f"mkdir -p $(dirname {q_path}) && tmp=$(mktemp -d /etc/gpurig-cdi.XXXXXX) && "
        f'nvidia-ctk cdi generate --output="$tmp/nvidia.yaml" && '
        f'echo {marker} >> "$tmp/nvidia.yaml" && mv -f "$tmp/nvidia.yaml" {q_path}; '
        'rc=$?; rm -rf "$tmp"; exit $rc'
    )


def commands(change: Change) -> list[str] | object:
    if change.id == "packages.missing":
        return [install(change)]
    if change.id == "toolkit.keyring":
        return fetch_key(change.data["url"], change.data["fingerprint"])
    if change.id == "toolkit.version":
        return install_pinned(change.data["version"])
    if change.id == "toolkit.hold":
        return [apt(f"apt-mark hold {' '.join(shlex.quote(n) for n in change.data['packages'])}")]
    if change.id == "toolkit.cdi":
        return [generate_cdi(change.data["driver"])]
    return write(change)  # toolkit.apt, toolkit.oci_hook


@operation()
def toolkit(spec: dict[str, Any]):
    """Key, repository and pin first, then the packages, then the hold and the CDI spec."""
    version = spec["nvidia_toolkit"]["version"]
    yield from apply(plan.plan(spec, read), f"toolkit {version} installed and held", commands)


@deploy("NVIDIA container toolkit")
def nvidia_toolkit(spec: dict[str, Any]) -> None:
    if toolkit_wanted(spec):
        version = spec["nvidia_toolkit"]["version"]
        toolkit(name=f"Install and hold the toolkit at {version}", spec=spec)
