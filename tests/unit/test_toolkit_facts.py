"""The toolkit's facts (run here for real where no GPU is needed, on recorded GPU outputs
otherwise) and the deploy's decisions for `gpu: auto | required | absent`."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from gpu_fixtures import read_fixture

from gpurig.facts.gpurig_nvidia import NvidiaGpus
from gpurig.facts.gpurig_packages import DebStatus
from gpurig.facts.gpurig_toolkit import CDI_MARKER, CdiSpec, ToolkitKeyring
from gpurig.plans import toolkit as toolkit_plan
from gpurig.plans.change import Change
from gpurig.plans.engine import NVIDIA_RUNTIME, daemon_keys
from gpurig.sandbox import aptrepo
from gpurig.spec.model import TOOLKIT_KEY, TOOLKIT_REPO, normalise

H100_LIST = "nvidia-smi-L_h100-80gb-mig_590.48.01.txt"
H100_VERSION = "nvidia-smi_version_590.48.01.txt"  # the same H100 machine as H100_LIST
MISMATCH = "driver_mismatch_nvml-570.124.txt"


def sh(command: str, path: str | None = None) -> list[str]:
    """Run a fact's command here, as pyinfra would on a host (optionally with another PATH)."""
    env = {"PATH": path} if path is not None else None
    out = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, check=True,
                         env=env)  # fmt: skip
    return out.stdout.splitlines()


def gpus_from(listing: str, **parts: str) -> dict:
    """NvidiaGpus on recorded outputs, as the parts of its command print them (nvidia-smi's
    after a line saying it ran; `module`: /proc/driver/nvidia/version)."""
    texts = {"list": listing, **parts}
    return NvidiaGpus.parse({label: ("" if label == "module" else "ran\n") + read_fixture(name)
                             for label, name in texts.items()})  # fmt: skip


H100 = gpus_from(H100_LIST, version=H100_VERSION)
# The fixture is plain `nvidia-smi`; NVML fails to initialise before any subcommand runs, so
# `nvidia-smi -L` on that machine fails with the same lines.
NO_GPU_MISMATCH = gpus_from(MISMATCH)
# A host without nvidia-smi, as this machine and CI (its command run for real on a bare PATH:
# tests/unit/test_node_facts.py).
NO_SMI = NvidiaGpus().default()


def test_h100_with_mig_is_a_gpu_with_its_driver():
    assert (H100["smi"], H100["present"], H100["driver"], H100["error"]) == (
        True, True, "590.48.01", None
    )  # fmt: skip
    assert [gpu["name"] for gpu in H100["listing"]] == ["NVIDIA H100 80GB HBM3"]


def test_failing_nvidia_smi_is_no_gpu_and_says_why():
    assert NO_GPU_MISMATCH["present"] is False and NO_GPU_MISMATCH["driver"] is None
    assert "Driver/library version mismatch" in NO_GPU_MISMATCH["error"]


def test_no_nvidia_smi_here():
    assert (NO_SMI["smi"], NO_SMI["present"], NO_SMI["error"]) == (
        False, False, "nvidia-smi is not installed"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("parts", "driver"),
    [
        ({"version": "nvidia-smi_version_610.57.04.txt"}, "610.57.04"),  # 610+: 'KMD version'
        # nvidia-smi too old for --version: the query's driver, else the loaded module's
        ({"query": "nvidia-smi_query-gpu_csv_h100-mig_590.48.01.txt"}, "590.48.01"),
        ({"module": "proc_driver_nvidia_version_384.98_proprietary.txt"}, "384.98"),
        ({"module": "proc_driver_nvidia_version_525.60.11_open_archlinux-no-date.txt"},
         "525.60.11"),
        # A Jetson's module line names its L4T release, not a driver.
        ({"module": "proc_driver_nvidia_version_jetson-orin-nx_l4t-35.3.1.txt"}, None),
    ],
)  # fmt: skip
def test_driver_version_from_recorded_outputs(parts: dict[str, str], driver: str | None):
    assert gpus_from(H100_LIST, **parts)["driver"] == driver


def test_keyring_fact_reads_sha_and_record(tmp_path: Path):
    key, record = tmp_path / "key.gpg", tmp_path / "record"
    fact = ToolkitKeyring()
    assert fact.process(sh(fact.command(str(key), str(record)))) == {
        "sha256": None,
        "recorded_sha256": None,
        "recorded_url": None,
    }
    key.write_bytes(b"\x99key")
    sha = sh(f"sha256sum < {key} | cut -d' ' -f1")[0]
    record.write_text(f"{sha} https://example.invalid/gpgkey\n")
    assert fact.process(sh(fact.command(str(key), str(record)))) == {
        "sha256": sha,
        "recorded_sha256": sha,
        "recorded_url": "https://example.invalid/gpgkey",
    }


def test_packages_fact_reads_dpkg_here():
    fact = DebStatus()
    found = fact.process(sh(fact.command(["dpkg", "gpurig-no-such-package"])))
    assert found["dpkg"]["version"] and found["dpkg"]["held"] is False
    assert "gpurig-no-such-package" not in found


def test_packages_fact_reads_holds_and_removed_packages():
    output = [
        "nvidia-container-toolkit\t1.17.8-1\thi ",
        "libnvidia-container1\t1.17.8-1\trc ",
        "nvidia-container-toolkit-base\t\thn ",
    ]
    assert DebStatus().process(output) == {
        "nvidia-container-toolkit": {"version": "1.17.8-1", "held": True},
        "libnvidia-container1": {"version": None, "held": False},
        "nvidia-container-toolkit-base": {"version": None, "held": True},
    }


def test_cdi_fact_reads_gpurig_marker(tmp_path: Path):
    spec, fact = tmp_path / "nvidia.yaml", CdiSpec()
    assert sh(fact.command(str(spec))) == []  # pyinfra gives the default, None
    spec.write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n")
    assert fact.process(sh(fact.command(str(spec)))) == ""
    spec.write_text(spec.read_text() + f"{CDI_MARKER}590.48.01\n")
    assert fact.process(sh(fact.command(str(spec)))) == "590.48.01"


def fresh(gpu: dict) -> Any:
    """A reader for a host where nothing is installed yet, with this GPU state."""

    def read(cls: type, **kwargs: Any) -> Any:
        return gpu if cls is NvidiaGpus else cls().default()

    return read


REPO = aptrepo.url("192.0.2.1", 8080)  # a documentation address: nothing connects
TOOLKIT = {"version": "1.17.8-1", "repo": REPO, "key": f"{REPO}/gpgkey"}
INSTALL = ["packages.missing", "toolkit.keyring", "toolkit.apt", "toolkit.apt",
           "toolkit.version", "toolkit.hold"]  # fmt: skip


def changes(spec: dict[str, Any], gpu: dict) -> list[Change]:
    return toolkit_plan.plan(normalise(spec), fresh(gpu))


@pytest.mark.parametrize(
    "spec",
    [
        {"engine": "docker"},
        {"engine": "none", "nvidia_toolkit": TOOLKIT},
        {"engine": "docker", "gpu": "absent", "nvidia_toolkit": TOOLKIT},
    ],
)
def test_nothing_without_toolkit_engine_or_gpus(spec: dict):
    assert changes(spec, H100) == []
    assert "runtimes" not in daemon_keys(normalise(spec))


@pytest.mark.parametrize("gpu", [NO_GPU_MISMATCH, NO_SMI])
def test_gpu_required_without_a_gpu_refuses(gpu: dict):
    [change] = changes({"engine": "docker", "gpu": "required", "nvidia_toolkit": TOOLKIT}, gpu)
    assert change.refused and change.id == "toolkit.gpu" and gpu["error"] in change.actual


@pytest.mark.parametrize(("policy", "gpu"), [("auto", NO_SMI), ("required", H100)])
def test_docker_gets_the_toolkit_and_the_runtime(policy: str, gpu: dict):
    spec = {"engine": "docker", "gpu": policy, "nvidia_toolkit": TOOLKIT}
    found = changes(spec, gpu)
    assert [c.id for c in found] == INSTALL
    assert found[1].data["url"] == TOOLKIT["key"]
    sources = next(c for c in found if c.subject.endswith(".list")).data["content"]
    assert "deb [signed-by=" in sources and f"{TOOLKIT['repo']} /" in sources
    assert found[4].data["version"] == "1.17.8-1"
    assert daemon_keys(normalise(spec))["runtimes"] == ("toolkit.runtime", NVIDIA_RUNTIME)


def test_podman_without_gpu_generates_no_cdi_spec():
    spec = {"engine": "podman", "nvidia_toolkit": {"version": "1.17.8-1"}}
    found = changes(spec, NO_GPU_MISMATCH)
    assert [c.id for c in found] == INSTALL  # the OCI hook is absent already
    assert found[1].data["url"] == TOOLKIT_KEY
    assert any(TOOLKIT_REPO in c.data.get("content", "") for c in found)


def test_podman_with_gpu_generates_cdi_for_its_driver():
    found = changes({"engine": "podman", "gpu": "auto", "nvidia_toolkit": TOOLKIT}, H100)
    assert [c.id for c in found] == [*INSTALL, "toolkit.cdi"]
    assert found[-1].data["driver"] == "590.48.01"


def test_the_toolkit_view_is_the_gpu_view_of_a_jetson_without_nvidia_smi():
    """Recorded `nvidia-container-cli info` on a Jetson AGX Xavier: no nvidia-smi, and the
    fields the CLI could not read printed as (null), which are absent, never values."""
    jetson = "nvidia-container-cli_info_jetson-agx-xavier_null-fields.txt"
    gpus = NvidiaGpus.parse({"toolkit": "ran\n" + read_fixture(jetson)})
    assert (gpus["smi"], gpus["present"], gpus["driver"], gpus["error"]) == (
        False, True, None, None
    )  # fmt: skip
    assert gpus["toolkit_view"] == {
        "driver": None,
        "cuda": "10.0",
        "devices": [{"index": "0", "model": "Xavier", "architecture": "7.2"}],
    }


def test_the_toolkit_view_beside_nvidia_smi_and_its_refusal():
    info = "nvidia-container-cli_info_gtx1080-maxq_390.87.txt"
    view = gpus_from(H100_LIST, version=H100_VERSION, toolkit=info)["toolkit_view"]
    assert (view["driver"], view["cuda"]) == ("390.87", "9.1")
    assert view["devices"][0]["bus_location"] == "00000000:01:00.0"
    failed = gpus_from(
        H100_LIST, toolkit="nvidia-container-cli_error_mig-device-unknown_530.30.02.txt"
    )
    assert failed["toolkit_view"] is None and "NVRM version" in failed["toolkit_view_error"]
    assert gpus_from(H100_LIST)["toolkit_view"] is None  # the toolkit is not installed


def test_the_toolkit_is_asked_only_where_installed_and_bounded():
    part = NvidiaGpus().command()
    assert "if command -v nvidia-container-cli >/dev/null 2>&1; then echo ran\n" in part
    assert "bounded nvidia-container-cli info 2>&1" in part
