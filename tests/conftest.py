"""The fault tally, shared by the unit and integration suites: test_faults_input feeds hostile
input to every reader and renderer, test_faults_host plants hostile names and outputs on a
host, test_pin sends pin hostile registries, test_rental_faults breaks sandbox hosts the way
fresh rentals break (a held dpkg lock, a full disk, a cut link, the controller interrupted);
each records its outcomes here, and the session ends with one line saying what was tried and
how it went.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest


@dataclass
class Faults:
    """Counts of hostile payloads tried, refused with a message, rendered, or crashed on."""

    tried: int = 0
    refused: int = 0
    rendered: int = 0
    tracebacks: int = 0
    injected: int = 0  # hostile names and outputs planted on a host, and host deaths
    bytes_lost: int = 0  # of the user's files, counted before and after
    secrets_seen: int = 0  # secret values or digests found in any output
    secrets_sent: int = 0  # requests that carried a token or salt where it must not go
    code_run: int = 0  # payloads that ran as code (a planted module imported, a shell word run)
    failed_alone: int = 0  # hosts broken mid-run that failed while the others completed
    # Attacks on root planted by another account (a git config program, a swapped
    # secret path, a flood, a daemonised child...): how many, how many refused, how many ran as
    # root (must stay 0).
    plants: int = 0
    plants_refused: int = 0
    plants_ran_as_root: int = 0
    refusal_times: dict[str, float] = field(default_factory=dict)

    def attempt(
        self, name: str, action: Callable[[], object], refusal: type[BaseException]
    ) -> BaseException | None:
        """Run `action`; return the `refusal` it raised (timed), None if it raised nothing.

        Any other exception counts as a traceback and propagates, failing the test.
        """
        self.tried += 1
        start = time.perf_counter()
        try:
            action()
        except refusal as exc:
            self.refused += 1
            self.refusal_times[name] = time.perf_counter() - start
            return exc
        except Exception:
            self.tracebacks += 1
            raise
        return None

    def plant(self, refused: bool, ran_as_root: bool) -> None:
        """Record one attack on root planted by another account, and how it ended."""
        self.plants += 1
        self.plants_refused += refused
        self.plants_ran_as_root += ran_as_root

    def summary(self) -> str:
        line = (
            f"faults: {self.tried} payloads tried, {self.refused} refused with a message, "
            f"{self.rendered} reports rendered, {self.tracebacks} tracebacks; "
            f"{self.injected} host faults injected, {self.code_run} code run, "
            f"{self.secrets_seen} secrets seen, {self.secrets_sent} secrets sent, "
            f"{self.bytes_lost} bytes lost, {self.failed_alone} hosts failed alone; "
            f"{self.plants} root plants, {self.plants_refused} refused, "
            f"{self.plants_ran_as_root} run as root"
        )
        if self.refusal_times:
            name, slowest = max(self.refusal_times.items(), key=lambda item: item[1])
            line += f"; slowest refusal {slowest * 1000:.1f} ms ({name})"
        return line


FAULTS = pytest.StashKey[Faults]()


@pytest.fixture(scope="session")
def faults(request: pytest.FixtureRequest) -> Faults:
    return request.config.stash.setdefault(FAULTS, Faults())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config):
    tally = config.stash.get(FAULTS, None)
    if tally is not None:
        terminalreporter.write_line(tally.summary())
        if config.option.verbose > 0:
            for name, seconds in sorted(tally.refusal_times.items(), key=lambda i: -i[1]):
                terminalreporter.write_line(f"  {seconds * 1000:8.1f} ms  {name}")


@pytest.fixture(scope="session", autouse=True)
def runtime_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """What the tests' runs keep (gpurig/spec/runtime.py: spec parses, node contracts' reads)
    goes to a directory of the test session's, not to this machine's /run/gpurig."""
    where = tmp_path_factory.mktemp("runtime")
    where.chmod(0o700)
    saved = os.environ.get("GPURIG_RUNTIME_DIR")
    os.environ["GPURIG_RUNTIME_DIR"] = str(where)
    yield where
    if saved is None:
        os.environ.pop("GPURIG_RUNTIME_DIR", None)
    else:
        os.environ["GPURIG_RUNTIME_DIR"] = saved


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A runtime directory of the test's own, not there yet (gpurig/spec/runtime.py)."""
    where = tmp_path / "run"
    monkeypatch.setenv("GPURIG_RUNTIME_DIR", str(where))
    return where


@pytest.fixture
def private_dir() -> Iterator[Path]:
    """A directory that only root may change, nor any directory above it: the import check runs
    an environment's python only there (pytest's tmp_path lies under /tmp, which anyone writes)."""
    top = Path(tempfile.mkdtemp(prefix="gpurig-test-", dir="/srv" if os.geteuid() == 0 else None))
    top.chmod(0o755)
    yield top
    shutil.rmtree(top)
