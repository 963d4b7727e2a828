"""Fixture tests (pyinfra-testing style) for the NVIDIA container toolkit's operations: one
JSON file per path in tests/unit/operations/nvidia_toolkit.<operation>/. Driver versions in
the CDI fixtures are the ones recorded GPU machines printed (checked below)."""

from __future__ import annotations

import json
from pathlib import Path

from gpu_fixtures import FIXTURES, read_fixture
from pyinfra_testing.operations import make_operation_tests

from facts.gpurig_nvidia import driver_version

OPERATIONS = Path(__file__).resolve().parent / "operations"

TestKeyring = make_operation_tests(
    "deploys", "nvidia_toolkit.keyring", OPERATIONS / "nvidia_toolkit.keyring"
)
TestPinnedPackages = make_operation_tests(
    "deploys", "nvidia_toolkit.pinned_packages", OPERATIONS / "nvidia_toolkit.pinned_packages"
)
TestCdiSpec = make_operation_tests(
    "deploys", "nvidia_toolkit.cdi_spec", OPERATIONS / "nvidia_toolkit.cdi_spec"
)


def recorded_drivers() -> set[str]:
    """Driver versions the NvidiaGpus fact reads from recorded `nvidia-smi --version` outputs."""
    return {driver_version(read_fixture(p.name)) for p in FIXTURES.glob("nvidia-smi_version_*")}


def test_cdi_fixtures_use_driver_versions_recorded_on_gpu_machines():
    drivers = recorded_drivers()
    assert drivers == {"590.48.01", "610.57.04"}
    for path in (OPERATIONS / "nvidia_toolkit.cdi_spec").glob("*.json"):
        data = json.loads(path.read_text())
        used = {data["kwargs"]["driver"], *data["facts"]["gpurig_nvidia.CdiSpec"].values()}
        # None: not generated yet or no version readable; "": generated without gpurig's marker
        assert used - {None, ""} <= drivers, path.name
