"""`gpurig drift` that also records each host's state as it was read, for the findings
catalogue's examples (tests/finding_examples.py): `python -m tests.drift_recorder DRIFT_ARGS`.

tests/integration/support.py runs drift through it when GPURIG_RECORD_STATES names a directory,
so the integration tests' own drift runs on sandbox hosts are what gets recorded. Each host with
findings becomes one JSON file there: the test that ran it, the host's spec, the state its one
read returned (the real parsers' values) or the connection error, what the secrets plan read on
this machine (tests.finding_examples.secret_sources: no secret), and the ids drift reported
(tests/unit/test_finding_examples.py holds that a replay still reports them). A recording is
written only if its replay renders exactly the blocks drift printed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from gpurig.checks.judge import EVERYTHING, Probed, Scope
from gpurig.spec.finding import HostReport
from tests.finding_examples import (
    RecordingError,
    blocks,
    encode_state,
    ids,
    replay,
    secret_sources,
)

DIRECTORY = "GPURIG_RECORD_STATES"


def recording(result: Probed, report: HostReport) -> dict[str, Any]:
    """What replays this host's report: its test, inventory entry and state (or error)."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    host = result.host
    return {
        "test": test,
        "host": {"name": host.name, "source": host.source, "spec": host.spec},
        "state": None if result.state is None else encode_state(result.state),
        "secrets": {} if result.state is None else secret_sources(host.spec, result.state),
        "connect_error": result.connect_error,
        "ids": ids(report),
    }


def record(result: Probed, report: HostReport, directory: Path) -> None:
    """Write one recording, if it replays to what drift printed."""
    if not report.findings:
        return
    try:
        found = recording(result, report)
        if blocks(replay(found)) != blocks(report):
            raise RecordingError("its replay renders other blocks")
    except RecordingError as exc:
        print(f"drift_recorder: {result.host.name} not recorded: {exc}", file=sys.stderr)
        return
    text = json.dumps(found, indent=1, sort_keys=True) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{digest}.json").write_text(text, encoding="utf-8")


def main() -> None:
    from gpurig.cli.entry import connects

    if connects(sys.argv[1:]):
        from gpurig.remote.cooperative import patch

        patch()
    from gpurig.cli.main import main as cli
    from gpurig.remote import drift

    judged = drift.report
    directory = Path(os.environ[DIRECTORY])

    def recorded(result: Probed, scope: Scope = EVERYTHING) -> HostReport:
        report = judged(result, scope)
        record(result, report, directory)
        return report

    drift.report = recorded  # type: ignore[assignment]
    cli(prog_name="gpurig")


if __name__ == "__main__":
    main()
