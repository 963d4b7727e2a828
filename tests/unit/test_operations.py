"""Operation fixtures in pyinfra's own style (tests/unit/operations/<module.op>/*.json):
facts in, commands, no-op description or exception out."""

from __future__ import annotations

from pathlib import Path

from pyinfra_testing.operations import make_operation_tests

from tests.unit.fact_values import load_every_table

load_every_table()

HERE = Path(__file__).parent / "operations"

TestCheckout = make_operation_tests("gpurig.deploys", "repos.checkout", HERE / "repos.checkout")
TestEnvironment = make_operation_tests(
    "gpurig.deploys", "repos.environment", HERE / "repos.environment"
)
TestLeftovers = make_operation_tests(
    "gpurig.deploys", "cleanup.leftovers", HERE / "cleanup.leftovers"
)


def test_every_operation_here_has_fixture_cases():
    """A folder renamed or emptied would otherwise leave an operation silently untested."""
    for cls in (TestCheckout, TestEnvironment, TestLeftovers):
        cases = [name for name in dir(cls) if name.startswith("test_")]
        assert len(cases) >= 6, f"{cls.__name__} has {len(cases)} fixture cases"
