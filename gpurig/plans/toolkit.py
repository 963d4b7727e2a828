"""The NVIDIA Container Toolkit (`nvidia_toolkit`), so containers see the host's GPUs: NVIDIA's
apt repository with its key, the four packages pinned and held at one version (an unattended
upgrade must not move them under a running job), and for Podman a CDI spec kept in step with
the driver. Docker's `nvidia` runtime key is judged with daemon.json (gpurig.plans.engine)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpurig.data.tables import table
from gpurig.facts.gpurig_nvidia import NvidiaGpus
from gpurig.facts.gpurig_packages import DebStatus
from gpurig.facts.gpurig_toolkit import CdiSpec, ToolkitKeyring
from gpurig.plans.change import Change
from gpurig.plans.files import managed
from gpurig.plans.packages import missing
from gpurig.spec.model import toolkit_wanted

KEYRING = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
# Which URL the keyring came from and its sha256 when written: a later run compares them
# instead of downloading the key again.
KEYRING_RECORD = "/var/lib/gpurig/nvidia-container-toolkit-keyring.source"
SOURCES_LIST = "/etc/apt/sources.list.d/nvidia-container-toolkit.list"
PREFERENCES = "/etc/apt/preferences.d/nvidia-container-toolkit"
CDI_SPEC = "/etc/cdi/nvidia.yaml"
# Installed by older toolkits for Podman; with a CDI spec it injects the GPUs a second time.
OCI_HOOK = "/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json"
# What the key download and dearmoring need on the host.
KEY_TOOLS = ["ca-certificates", "curl", "gnupg"]


def packages() -> list[str]:
    """The toolkit's packages, all released at one version (gpurig/data/toolkit.yaml)."""
    return list(table("toolkit.yaml")["packages"])


def sources_list(repo: str) -> str:
    """The apt source line for NVIDIA's flat repository (or a mirror of it)."""
    return f"# Managed by gpurig.\ndeb [signed-by={KEYRING}] {repo} /\n"


def preferences(names: list[str], version: str) -> str:
    """An apt pin holding every toolkit package at `version`, downgrades included."""
    return (
        "# Managed by gpurig: the NVIDIA container toolkit at one version.\n"
        f"Package: {' '.join(names)}\nPin: version {version}\nPin-Priority: 1001\n"
    )


def _keyring(url: str, fingerprint: str | None, found: Mapping[str, Any]) -> list[Change]:
    if found["sha256"] is not None and found["sha256"] == found["recorded_sha256"]:
        if found["recorded_url"] == url:
            return []
        actual = f"written from {found['recorded_url']}"
    else:
        actual = "missing" if found["sha256"] is None else "not the key gpurig wrote"
    return [
        Change(
            "toolkit.keyring",
            KEYRING,
            f"the key from {url}",
            actual,
            f"download the key from {url} and dearmor it",
            data={"url": url, "fingerprint": fingerprint},
        )
    ]


def _packages(version: str, state: Mapping[str, Any]) -> list[Change]:
    names = packages()
    found = {n: state.get(n) or {"version": None, "held": False} for n in names}
    wrong = {n: found[n]["version"] for n in names if found[n]["version"] != version}
    unheld = [n for n in names if not found[n]["held"]]
    changes = []
    if wrong:
        actual = ", ".join(f"{n} {v or 'missing'}" for n, v in wrong.items())
        changes.append(
            Change(
                "toolkit.version",
                "NVIDIA container toolkit",
                version,
                actual,
                f"install {', '.join(names)} at {version}",
                field="version",
                data={"version": version},
            )
        )
    if unheld:
        changes.append(
            Change(
                "toolkit.hold",
                "NVIDIA container toolkit",
                "held",
                f"not held: {', '.join(unheld)}",
                f"apt-mark hold {' '.join(unheld)}",
                field="hold",
                data={"packages": unheld},
            )
        )
    return changes


def plan(spec: Mapping[str, Any], read: Callable[..., Any]) -> list[Change]:
    if not toolkit_wanted(spec):
        return []
    settings = spec["nvidia_toolkit"]
    version = settings["version"]
    gpu = read(NvidiaGpus)
    tools = missing(KEY_TOOLS, read, "to fetch NVIDIA's key")
    keyring = _keyring(
        settings["key"],
        settings.get("key_fingerprint"),
        read(ToolkitKeyring, path=KEYRING, record=KEYRING_RECORD),
    )
    files = {
        SOURCES_LIST: sources_list(settings["repo"]),
        PREFERENCES: preferences(packages(), version),
    }
    written = managed("toolkit.apt", files, read)
    installed = _packages(version, read(DebStatus, packages=packages()))
    podman = spec["engine"] == "podman"
    hook = managed("toolkit.oci_hook", {OCI_HOOK: None}, read) if podman else []
    cdi = read(CdiSpec, path=CDI_SPEC) if podman else None
    if spec["gpu"] == "required" and not gpu["present"]:
        return [
            Change(
                "toolkit.gpu",
                "NVIDIA container toolkit",
                "an NVIDIA GPU (gpu: required)",
                f"none: {gpu['error']}",
                "install nothing until a GPU answers nvidia-smi",
                refused=True,
            )
        ]
    changes = tools + keyring + written + installed + hook
    wanted = gpu["driver"] or "unknown"
    if podman and gpu["present"] and cdi != wanted:
        changes.append(
            Change(
                "toolkit.cdi",
                CDI_SPEC,
                f"generated for driver {wanted}",
                "missing" if cdi is None else f"generated for {cdi or 'unknown'}",
                f"generate {CDI_SPEC} with nvidia-ctk",
                data={"driver": wanted},
            )
        )
    return changes
