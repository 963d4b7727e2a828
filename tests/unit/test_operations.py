"""Operation fixtures in pyinfra's own style (tests/unit/operations/<module.op>/*.json):
facts in, commands, no-op description or exception out."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyinfra_testing.operations import make_operation_tests

HERE = Path(__file__).parent / "operations"
REPO_ROOT = HERE.parents[2]


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Secret fixtures name their local source relative to the repository, as pyinfra runs."""
    monkeypatch.chdir(REPO_ROOT)


TestRepo = make_operation_tests("deploys", "repos.repo", HERE / "repos.repo")
TestPythonEnv = make_operation_tests("deploys", "repos.python_env", HERE / "repos.python_env")
TestSecret = make_operation_tests("deploys", "secrets.secret", HERE / "secrets.secret")
TestRaySessions = make_operation_tests(
    "deploys", "cleanup.ray_sessions", HERE / "cleanup.ray_sessions"
)
TestCoreFiles = make_operation_tests("deploys", "cleanup.core_files", HERE / "cleanup.core_files")
TestEditableFinders = make_operation_tests(
    "deploys", "cleanup.editable_finders", HERE / "cleanup.editable_finders"
)
TestFlashinferCache = make_operation_tests(
    "deploys", "cleanup.flashinfer_cache", HERE / "cleanup.flashinfer_cache"
)


def test_every_operation_here_has_fixture_cases():
    """A folder renamed or emptied would otherwise leave an operation silently untested."""
    classes = [TestRepo, TestPythonEnv, TestSecret, TestRaySessions, TestCoreFiles]
    classes += [TestEditableFinders, TestFlashinferCache]
    for cls in classes:
        cases = [name for name in dir(cls) if name.startswith("test_")]
        assert len(cases) >= 2, f"{cls.__name__} has {len(cases)} fixture cases"
