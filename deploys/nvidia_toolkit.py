"""The NVIDIA Container Toolkit (`spec.nvidia_toolkit`), so containers see the host's GPUs:
NVIDIA's apt repository with its key, the four packages pinned and held at one version (an
unattended upgrade must not move them under a running training job), the `nvidia` runtime in
Docker's daemon.json, and for Podman a CDI spec kept in step with the driver."""

from __future__ import annotations

import shlex
from io import StringIO
from typing import Any

from pyinfra import host
from pyinfra.api import deploy, operation
from pyinfra.operations import files

from deploys.engine import docker_daemon_keys
from deploys.guard import refuse
from deploys.packages import ensure_packages
from facts.gpurig_nvidia import CDI_MARKER, CdiSpec, NvidiaGpus, ToolkitKeyring, ToolkitPackages
from gpurig.evaluate import rules

DEFAULT_KEY = "https://nvidia.github.io/libnvidia-container/gpgkey"
DEFAULT_REPO = "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"
KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
# Which URL the keyring came from and its sha256 when written: a later run compares them
# instead of downloading the key again.
KEYRING_RECORD = "/var/lib/gpurig/nvidia-container-toolkit-keyring.source"
SOURCES_LIST = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
PREFERENCES = "/etc/apt/preferences.d/nvidia-container-toolkit"
DOCKER_RUNTIME = {"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}
CDI_SPEC = "/etc/cdi/nvidia.yaml"
# Installed by older toolkits for Podman; with a CDI spec it injects the GPUs a second time.
OCI_HOOK = "/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json"
# What the key download and dearmoring need on the host.
KEY_TOOLS = ["ca-certificates", "curl", "gnupg"]


def sources_list(repo: str) -> str:
    """The apt source line for NVIDIA's flat repository (or a mirror of it)."""
    return f"# Managed by gpurig.\ndeb [signed-by={KEYRING}] {repo} /\n"


def preferences(packages: list[str], version: str) -> str:
    """An apt pin holding every toolkit package at `version`, downgrades included."""
    return (
        "# Managed by gpurig: the NVIDIA container toolkit at one version.\n"
        f"Package: {' '.join(packages)}\nPin: version {version}\nPin-Priority: 1001\n"
    )


@operation()
def keyring(url: str, path: str = KEYRING, record: str = KEYRING_RECORD):
    """Download the repository key from `url` and dearmor it to `path`, unless the keyring
    there is the one gpurig wrote from that same URL (same sha256)."""
    current = host.get_fact(ToolkitKeyring, path=path, record=record)
    if (
        current["sha256"] is not None
        and current["sha256"] == current["recorded_sha256"]
        and current["recorded_url"] == url
    ):
        host.noop(f"{path} is the key from {url}")
        return
    q_url, q_path, q_record = shlex.quote(url), shlex.quote(path), shlex.quote(record)
    new = shlex.quote(f"{path}.gpurig-new")
    # A private gpg home, so root's keyrings stay untouched; rename for an atomic write.
    yield (
        f'tmp=$(mktemp -d) && curl -fsSL --retry 3 -o "$tmp/key" {q_url} && '
        f'gpg --batch --homedir "$tmp" --dearmor -o "$tmp/key.gpg" "$tmp/key" && '
        f'install -m 644 "$tmp/key.gpg" {new} && mv -f {new} {q_path}; '
        'rc=$?; gpgconf --homedir "$tmp" --kill all 2>/dev/null; rm -rf "$tmp"; exit $rc'
    )
    yield (
        f"mkdir -p $(dirname {q_record}) && "
        f"echo \"$(sha256sum < {q_path} | cut -d' ' -f1) \"{q_url} > {q_record}.new && "
        f"mv -f {q_record}.new {q_record}"
    )


@operation()
def pinned_packages(packages: list[str], version: str):
    """Install `packages` at exactly `version` and hold them; apt's lists are refreshed only
    when something must be installed, so a converged host never needs the repository."""
    current = host.get_fact(ToolkitPackages, packages=packages)
    state = {name: current.get(name) or {"version": None, "held": False} for name in packages}
    wrong = [name for name in packages if state[name]["version"] != version]
    unheld = [name for name in packages if not state[name]["held"]]
    if not wrong and not unheld:
        host.noop(f"{', '.join(packages)} at {version} and held")
        return
    if wrong:
        pins = " ".join(shlex.quote(f"{name}={version}") for name in packages)
        yield "apt-get update -q"
        yield (
            "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "
            f"--allow-downgrades --allow-change-held-packages {pins}"
        )
    if unheld:
        yield f"apt-mark hold {' '.join(shlex.quote(name) for name in unheld)}"


@operation()
def cdi_spec(driver: str | None, path: str = CDI_SPEC):
    """Generate the CDI spec Podman reads GPUs from, again whenever the driver changed: the
    spec names the driver's library files, which a new driver replaces."""
    wanted = driver or "unknown"
    recorded = host.get_fact(CdiSpec, path=path)
    if recorded == wanted:
        host.noop(f"{path} was generated for driver {wanted}")
        return
    q_path = shlex.quote(path)
    marker = shlex.quote(f"{CDI_MARKER}{wanted}")
    # Generated outside /etc/cdi (which Podman reads), then renamed into place.
    yield (
        f"mkdir -p $(dirname {q_path}) && tmp=$(mktemp -d /etc/gpurig-cdi.XXXXXX) && "
        f'nvidia-ctk cdi generate --output="$tmp/nvidia.yaml" && '
        f'echo {marker} >> "$tmp/nvidia.yaml" && mv -f "$tmp/nvidia.yaml" {q_path}; '
        'rc=$?; rm -rf "$tmp"; exit $rc'
    )


@deploy("NVIDIA container toolkit")
def nvidia_toolkit(spec: dict[str, Any]) -> None:
    settings = spec.get("nvidia_toolkit")
    engine = spec.get("engine", "none")
    if not settings or engine == "none":
        return
    policy = spec.get("gpu", "auto")
    if policy == "absent":
        host.noop("gpu: absent, so the NVIDIA container toolkit is not installed")
        return
    gpu = host.get_fact(NvidiaGpus)
    if policy == "required" and not gpu["present"]:
        refuse(reason=f"gpu: required, but no NVIDIA GPU answers `nvidia-smi -L`: {gpu['error']}")
        return
    packages = rules()["toolkit_packages"]
    version = settings["version"]
    ensure_packages(KEY_TOOLS)
    keyring(name="NVIDIA repository key", url=settings.get("key", DEFAULT_KEY))
    source = sources_list(settings.get("repo", DEFAULT_REPO))
    files.put(name=f"Write {SOURCES_LIST}", src=StringIO(source), dest=SOURCES_LIST, mode="644")
    pin = preferences(packages, version)
    files.put(name=f"Pin the toolkit at {version}", src=StringIO(pin), dest=PREFERENCES, mode="644")
    pinned_packages(name=f"Install and hold the toolkit at {version}", packages=packages,
                    version=version)  # fmt: skip
    if engine == "docker":
        docker_daemon_keys(DOCKER_RUNTIME, "Register the nvidia runtime in")
        return
    files.file(name=f"Remove {OCI_HOOK}", path=OCI_HOOK, present=False)
    if gpu["present"]:
        cdi_spec(name=f"CDI spec {CDI_SPEC}", driver=gpu["driver"])
