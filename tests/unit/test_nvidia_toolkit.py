"""The toolkit's facts (run here for real where no GPU is needed, on recorded GPU outputs
otherwise) and the deploy's decisions for `gpu: auto | required | absent`."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from gpu_fixtures import read_fixture
from pyinfra.context import ctx_host, ctx_state
from pyinfra_testing.util import FakeState, create_host

from deploys import nvidia_toolkit as nt
from facts.gpurig_nvidia import (
    CDI_MARKER,
    CdiSpec,
    NvidiaGpus,
    ToolkitKeyring,
    ToolkitPackages,
    driver_version,
)
from gpurig.sandbox import aptrepo

H100_LIST = "nvidia-smi-L_h100-80gb-mig_590.48.01.txt"
H100_VERSION = "nvidia-smi_version_590.48.01.txt"  # the same H100 machine as H100_LIST
MISMATCH = "driver_mismatch_nvml-570.124.txt"


def sh(command: str, path: str | None = None) -> list[str]:
    """Run a fact's command here, as pyinfra would on a host (optionally with another PATH)."""
    env = {"PATH": path} if path is not None else None
    out = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, check=True,
                         env=env)  # fmt: skip
    return out.stdout.splitlines()


def gpus_from(listing: str, section: str = "list ok", version: str | None = None) -> dict:
    """NvidiaGpus on recorded outputs, framed by the `== ` lines the fact's command prints."""
    output = [f"== {section}", *read_fixture(listing).splitlines(), "== version"]
    return NvidiaGpus().process(output + (read_fixture(version).splitlines() if version else []))


H100 = gpus_from(H100_LIST, version=H100_VERSION)
# The fixture is plain `nvidia-smi`; NVML fails to initialise before any subcommand runs, so
# `nvidia-smi -L` on that machine fails with the same lines.
NO_GPU_MISMATCH = gpus_from(MISMATCH, section="list failed")
# A PATH without nvidia-smi, as on this machine and in CI.
NO_SMI = NvidiaGpus().process(sh(NvidiaGpus().command(), path="/nonexistent"))


def test_h100_with_mig_is_a_gpu_with_its_driver():
    assert H100 == {
        "present": True,
        "gpus": ["NVIDIA H100 80GB HBM3"],
        "driver": "590.48.01",
        "error": None,
    }


def test_failing_nvidia_smi_is_no_gpu_and_says_why():
    assert NO_GPU_MISMATCH["present"] is False
    assert "Driver/library version mismatch" in NO_GPU_MISMATCH["error"]


def test_no_nvidia_smi_here():
    assert NO_SMI == {
        "present": False,
        "gpus": [],
        "driver": None,
        "error": "nvidia-smi is not installed",
    }


@pytest.mark.parametrize(
    ("fixture", "driver"),
    [
        ("nvidia-smi_version_610.57.04.txt", "610.57.04"),  # 610+: 'KMD version'
        ("proc_driver_nvidia_version_384.98_proprietary.txt", "384.98"),  # no --version
        ("proc_driver_nvidia_version_525.60.11_open_archlinux-no-date.txt", "525.60.11"),
    ],
)
def test_driver_version_from_recorded_outputs(fixture: str, driver: str):
    assert driver_version(read_fixture(fixture)) == driver


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
    fact = ToolkitPackages()
    found = fact.process(sh(fact.command(["dpkg", "gpurig-no-such-package"])))
    assert found["dpkg"]["version"] and found["dpkg"]["held"] is False
    assert "gpurig-no-such-package" not in found


def test_packages_fact_reads_holds_and_removed_packages():
    output = [
        "nvidia-container-toolkit\t1.17.8-1\thi ",
        "libnvidia-container1\t1.17.8-1\trc ",
        "== held",
        "nvidia-container-toolkit",
        "nvidia-container-toolkit-base",
    ]
    assert ToolkitPackages().process(output) == {
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


def run_deploy(
    monkeypatch: pytest.MonkeyPatch, spec: dict[str, Any], gpu: dict
) -> tuple[list[tuple[str, dict]], str | None]:
    """The deploy's body with its operations recorded instead of run: (calls, noop note)."""
    calls: list[tuple[str, dict]] = []

    def recorder(name: str):
        return lambda *args, **kwargs: calls.append((name, {"args": list(args), **kwargs}))

    for name in ("refuse", "ensure_packages", "keyring", "pinned_packages", "cdi_spec",
                 "docker_daemon_keys"):  # fmt: skip
        monkeypatch.setattr(nt, name, recorder(name))
    monkeypatch.setattr(nt, "files", SimpleNamespace(put=recorder("put"), file=recorder("file")))
    state = FakeState()
    host = create_host(state, facts={"gpurig_nvidia.NvidiaGpus": gpu})
    with ctx_state.use(state), ctx_host.use(host):
        nt.nvidia_toolkit.__wrapped__(spec)
    return calls, host.noop_description


REPO = aptrepo.url("192.0.2.1", 8080)  # a documentation address: nothing connects
TOOLKIT = {"version": "1.17.8-1", "repo": REPO, "key": f"{REPO}/gpgkey"}
INSTALL = ["ensure_packages", "keyring", "put", "put", "pinned_packages"]


def names(calls: list[tuple[str, dict]]) -> list[str]:
    return [name for name, _ in calls]


@pytest.mark.parametrize(
    "spec",
    [{"engine": "docker"}, {"engine": "none", "nvidia_toolkit": TOOLKIT}],
)
def test_nothing_without_toolkit_or_engine(monkeypatch: pytest.MonkeyPatch, spec: dict):
    assert run_deploy(monkeypatch, spec, H100) == ([], None)


def test_gpu_absent_skips_with_a_note(monkeypatch: pytest.MonkeyPatch):
    spec = {"engine": "docker", "gpu": "absent", "nvidia_toolkit": TOOLKIT}
    calls, note = run_deploy(monkeypatch, spec, H100)
    assert calls == [] and note and "gpu: absent" in note


@pytest.mark.parametrize("gpu", [NO_GPU_MISMATCH, NO_SMI])
def test_gpu_required_without_a_gpu_refuses(monkeypatch: pytest.MonkeyPatch, gpu: dict):
    spec = {"engine": "docker", "gpu": "required", "nvidia_toolkit": TOOLKIT}
    calls, _ = run_deploy(monkeypatch, spec, gpu)
    assert names(calls) == ["refuse"]
    assert "gpu: required" in calls[0][1]["reason"] and gpu["error"] in calls[0][1]["reason"]


@pytest.mark.parametrize(("policy", "gpu"), [("auto", NO_SMI), ("required", H100)])
def test_docker_gets_the_toolkit_and_the_runtime(
    monkeypatch: pytest.MonkeyPatch, policy: str, gpu: dict
):
    spec = {"engine": "docker", "gpu": policy, "nvidia_toolkit": TOOLKIT}
    calls, _ = run_deploy(monkeypatch, spec, gpu)
    assert names(calls) == [*INSTALL, "docker_daemon_keys"]
    assert calls[1][1]["url"] == TOOLKIT["key"]
    assert "deb [signed-by=" in calls[2][1]["src"].getvalue()
    assert f"{TOOLKIT['repo']} /" in calls[2][1]["src"].getvalue()
    assert calls[4][1]["version"] == "1.17.8-1"
    assert calls[5][1]["args"][0] == nt.DOCKER_RUNTIME


def test_podman_without_gpu_generates_no_cdi_spec(monkeypatch: pytest.MonkeyPatch):
    spec = {"engine": "podman", "nvidia_toolkit": {"version": "1.17.8-1"}}
    calls, _ = run_deploy(monkeypatch, spec, NO_GPU_MISMATCH)
    assert names(calls) == [*INSTALL, "file"]
    assert calls[1][1]["url"] == nt.DEFAULT_KEY
    assert nt.DEFAULT_REPO in calls[2][1]["src"].getvalue()
    assert calls[5][1] == {"args": [], "name": f"Remove {nt.OCI_HOOK}", "path": nt.OCI_HOOK,
                           "present": False}  # fmt: skip


def test_podman_with_gpu_generates_cdi_for_its_driver(monkeypatch: pytest.MonkeyPatch):
    spec = {"engine": "podman", "gpu": "auto", "nvidia_toolkit": TOOLKIT}
    calls, _ = run_deploy(monkeypatch, spec, H100)
    assert names(calls) == [*INSTALL, "file", "cdi_spec"]
    assert calls[-1][1]["driver"] == "590.48.01"
