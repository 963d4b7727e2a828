"""`gpurig drift --textfile` read by a real node_exporter (Debian's prometheus-node-exporter)
and fetched back over HTTP, as Prometheus would scrape it: node_exporter's own parser accepts
the file (`node_textfile_scrape_error 0`), and the finding, its zeros and the run's series come
back with their values.

node_exporter runs here on loopback, on a free port, with every collector but textfile off:
the sandbox's full hosts could install it only from the sandbox's apt repository, which does
not carry it, and the exporter is the same binary either way. `--local` checks this machine;
the controller run reads the sandbox's fleet hosts over SSH and writes one file for them all.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import Sandbox, gpurig, write_inventory

from gpurig import __version__

EXPORTER = Path("/usr/bin/prometheus-node-exporter")
ABSENT = "gpurig-test-no-such-package"
Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass(frozen=True)
class Exporter:
    directory: Path
    url: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(exporter: Exporter) -> Series:
    """GET /metrics and parse it: (name, sorted labels) -> value."""
    with urllib.request.urlopen(exporter.url, timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.fixture
def exporter(tmp_path: Path) -> Iterator[Exporter]:
    if not EXPORTER.is_file():
        pytest.fail(f"{EXPORTER} is missing: scripts/setup.sh installs prometheus-node-exporter")
    directory = tmp_path / "textfile"
    directory.mkdir()
    log = tmp_path / "node_exporter.log"
    port = free_port()
    argv = [
        str(EXPORTER),
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.disable-exporter-metrics",
        "--collector.disable-defaults",
        "--collector.textfile",
        f"--collector.textfile.directory={directory}",
    ]
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    running = Exporter(directory, f"http://127.0.0.1:{port}/metrics")
    try:
        deadline = time.monotonic() + 15
        while True:
            assert proc.poll() is None, f"node_exporter exited: {log.read_text()}"
            try:
                scrape(running)
                break
            except OSError:
                assert time.monotonic() < deadline, f"no answer on {port}: {log.read_text()}"
                time.sleep(0.1)
        yield running
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def drift_local(tmp_path: Path, exporter: Exporter, packages: str) -> int:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"core_dumps: enabled\npackages: [{packages}]\n")
    args = ["drift", "--local", "--spec", str(spec), "--textfile", str(exporter.directory)]
    return gpurig(*args).returncode


def finding(series: Series, fid: str, severity: str = "error", **host: str) -> float:
    labels = tuple(sorted({**host, "id": fid, "severity": severity}.items()))
    return series["gpurig_drift_findings", labels]


def test_local_textfile_scraped_shows_the_finding_then_0(
    tmp_path: Path, exporter: Exporter
) -> None:
    started = time.time()
    assert drift_local(tmp_path, exporter, f"dpkg, {ABSENT}") == 1
    series = scrape(exporter)
    assert series["node_textfile_scrape_error", ()] == 0
    mtime = ("file", str(exporter.directory / "gpurig_drift.prom"))
    assert series["node_textfile_mtime_seconds", (mtime,)] >= int(started)
    assert finding(series, "packages.missing") == 1
    assert finding(series, "packages.missing", "warn") == 0
    assert finding(series, "disk.free") == 0  # checked and passed: the series is there
    assert series["gpurig_drift_findings_by_severity", (("severity", "error"),)] == 1
    assert series["gpurig_drift_last_run_success", ()] == 1
    assert started <= series["gpurig_drift_last_run_timestamp_seconds", ()] <= time.time()
    assert series["gpurig_build_info", (("version", __version__),)] == 1

    # The package is no longer asked for: the same series, now 0.
    assert drift_local(tmp_path, exporter, "dpkg") == 0
    series = scrape(exporter)
    assert finding(series, "packages.missing") == 0
    assert series["gpurig_drift_findings_by_severity", (("severity", "error"),)] == 0

    # node_exporter's parser is strict: a malformed file next to ours is reported.
    (exporter.directory / "broken.prom").write_text('gpurig_broken{id="x" 1\n')
    assert scrape(exporter)["node_textfile_scrape_error", ()] == 1


@pytest.mark.sandbox
def test_controller_textfile_labels_each_fleet_host(
    sandbox: Sandbox, tmp_path: Path, exporter: Exporter
) -> None:
    specs = {
        "fleet-001": {"engine": "none", "core_dumps": "enabled", "packages": [ABSENT]},
        "fleet-002": {"engine": "none", "core_dumps": "enabled", "packages": ["dpkg"]},
    }
    inventory = write_inventory(sandbox, tmp_path / "inventory.yaml", specs)
    limits = [arg for name in specs for arg in ("--limit", name)]
    proc = gpurig("drift", str(inventory), *limits, "--textfile", str(exporter.directory))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    series = scrape(exporter)
    assert series["node_textfile_scrape_error", ()] == 0
    assert finding(series, "packages.missing", host="fleet-001") == 1
    assert finding(series, "packages.missing", host="fleet-002") == 0
    for name in specs:
        assert series["gpurig_drift_last_run_success", (("host", name),)] == 1
    assert series["gpurig_drift_last_run_duration_seconds", ()] > 0
