"""Fixture tests (pyinfra-testing style) for the NVIDIA container toolkit's operation: one JSON
file per path in tests/unit/operations/toolkit.toolkit/, each a converged host with one
concern changed. Driver versions in the CDI cases are the ones recorded GPU machines printed."""

from __future__ import annotations

import json
from pathlib import Path

from gpu_fixtures import FIXTURES, read_fixture
from pyinfra_testing.operations import make_operation_tests

from gpurig.facts.gpurig_nvidia import NvidiaGpus
from tests.unit.fact_values import load_every_table

load_every_table()

OPERATIONS = Path(__file__).resolve().parent / "operations" / "toolkit.toolkit"

TestToolkit = make_operation_tests("gpurig.deploys", "toolkit.toolkit", OPERATIONS)


def recorded_drivers() -> set[str]:
    """Driver versions the NvidiaGpus fact reads from recorded `nvidia-smi --version` outputs
    (with a recorded listing: a driver is read only where a GPU is listed)."""
    listing = read_fixture("nvidia-smi-L_h100-80gb-mig_590.48.01.txt")
    return {
        NvidiaGpus.parse({"list": f"ran\n{listing}", "version": f"ran\n{read_fixture(p.name)}"})[
            "driver"
        ]
        for p in FIXTURES.glob("nvidia-smi_version_*")
    }


def test_cdi_fixtures_use_driver_versions_recorded_on_gpu_machines():
    drivers = recorded_drivers()
    assert drivers == {"590.48.01", "610.57.04"}
    cases = sorted(OPERATIONS.glob("cdi_spec-*.json"))
    assert len(cases) == 5
    for path in cases:
        facts = json.loads(path.read_text())["facts"]
        gpu, cdi = facts["gpurig_nvidia.NvidiaGpus"], facts["gpurig_toolkit.CdiSpec"]
        used = {gpu["driver"], *cdi.values()}
        # None: not generated yet or no version readable; "": generated without gpurig's marker
        assert used - {None, ""} <= drivers, path.name


def test_every_toolkit_path_has_a_case():
    cases = [name for name in dir(TestToolkit) if name.startswith("test_")]
    assert len(cases) >= 16
