"""`gpurig drift --textfile`: the `.prom` file read back by prometheus_client's exposition parser
(a parser other than the renderer), zeros for every id a checked host did not have, no host
text in labels, label values escaped, and the atomic write node_exporter needs."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
from test_cli_drift import free_port, inventory

from gpurig import __version__
from gpurig.checks.all import CHECK_IDS, NOT_READ, known_ids
from gpurig.checks.node import unreachable, unreadable
from gpurig.cli.main import main
from gpurig.plans import CHANGE_IDS
from gpurig.plans.change import Change, findings
from gpurig.report import textfile
from gpurig.spec.finding import Finding, HostReport

HOSTILE = 'ev"il\\ \n\x1b[2J{} # TYPE x counter'
DRIFTED = HostReport(
    "gpu-1",
    True,
    [
        Finding("packages.missing", "error", "tmux: differs", "installed", "missing", "converge"),
        Finding("packages.missing", "error", "htop: differs", "installed", "missing", "converge"),
        Finding("shm.size", "warn", HOSTILE, "<= 1 GiB", HOSTILE, "lower it", subject=HOSTILE),
    ],
)
CLEAN = HostReport("gpu-2", True, [])
DOWN = HostReport("gpu-3", False, [unreachable("connection refused")])


def parse(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Family name -> {sorted labels: value}; every family must be a gauge."""
    parsed = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge", family.name
        samples = {tuple(sorted(s.labels.items())): s.value for s in family.samples}
        assert len(samples) == len(family.samples), f"{family.name}: a series twice"
        parsed[family.name] = samples
    return parsed


def labels(**pairs: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(pairs.items()))


def test_local_file_has_each_finding_zeros_counts_and_run_info() -> None:
    text = textfile.render([DRIFTED], finished=1700000000.25, duration=1.5, host_label=False)
    metrics = parse(text)
    findings = metrics["gpurig_drift_findings"]
    assert findings[labels(id="packages.missing", severity="error")] == 2
    assert findings[labels(id="shm.size", severity="warn")] == 1
    # Every other id, both severities, is there with 0: alerts never meet a missing series.
    assert findings[labels(id="disk.free", severity="error")] == 0
    assert findings[labels(id="disk.free", severity="warn")] == 0
    assert findings[labels(id="packages.missing", severity="warn")] == 0
    assert len(findings) == 2 * len(known_ids())
    assert sum(findings.values()) == 3
    assert metrics["gpurig_drift_findings_by_severity"] == {
        labels(severity="error"): 2,
        labels(severity="warn"): 1,
    }
    assert metrics["gpurig_drift_last_run_success"] == {(): 1}
    assert metrics["gpurig_drift_last_run_timestamp_seconds"] == {(): 1700000000.25}
    assert metrics["gpurig_drift_last_run_duration_seconds"] == {(): 1.5}
    assert metrics["gpurig_build_info"] == {labels(version=__version__): 1}


def test_a_grouped_finding_counts_under_each_of_its_ids() -> None:
    """A recreated container is one finding in the report and one per field in the metrics."""
    fields = [Change(f"container.{f}", "container train", "a", "b", "recreate train", field=f)
              for f in ("shm_size", "user")]  # fmt: skip
    report = HostReport("gpu-1", True, findings(fields))
    metrics = parse(textfile.render([report], finished=1.0, duration=1.0, host_label=False))
    found = metrics["gpurig_drift_findings"]
    assert found[labels(id="container.shm_size", severity="error")] == 1
    assert found[labels(id="container.user", severity="error")] == 1
    assert metrics["gpurig_drift_findings_by_severity"][labels(severity="error")] == 1


def test_known_ids_are_the_plans_and_checks_lists() -> None:
    assert set(known_ids()) == {*CHANGE_IDS, *CHECK_IDS}
    assert len(known_ids()) == len(set(known_ids()))
    assert set(CHECK_IDS) >= NOT_READ


def test_no_host_text_in_the_file() -> None:
    """Messages, expected and actual values quote the host: none of it is written."""
    text = textfile.render([DRIFTED], 0.0, 0.0, host_label=False)
    for words in ('ev"il', "tmux", "htop", "converge", "\x1b", "installed", ">= 1 GiB"):
        assert words not in text
    # Label names: these alone (and `host` from a controller).
    names = set(re.findall(r'[{,]([a-z_]+)="', text))
    assert names == {"id", "severity", "version"}


def test_controller_file_labels_every_host_and_claims_no_zero_for_an_unread_host() -> None:
    metrics = parse(textfile.render([DRIFTED, CLEAN, DOWN], 1.0, 2.0, host_label=True))
    findings = metrics["gpurig_drift_findings"]
    assert findings[labels(host="gpu-1", id="packages.missing", severity="error")] == 2
    assert findings[labels(host="gpu-2", id="packages.missing", severity="error")] == 0
    assert findings[labels(host="gpu-3", id="host.unreachable", severity="error")] == 1
    # gpu-3 was not read: nothing there is claimed to have passed.
    assert {dict(k)["id"] for k in findings if dict(k)["host"] == "gpu-3"} == {"host.unreachable"}
    assert metrics["gpurig_drift_last_run_success"] == {
        labels(host="gpu-1"): 1,
        labels(host="gpu-2"): 1,
        labels(host="gpu-3"): 0,
    }
    assert metrics["gpurig_drift_findings_by_severity"][labels(host="gpu-3", severity="error")] == 1
    assert metrics["gpurig_drift_findings_by_severity"][labels(host="gpu-2", severity="warn")] == 0
    # The run's own series once per file, not per host.
    assert metrics["gpurig_drift_last_run_duration_seconds"] == {(): 2.0}


def test_a_partly_unreadable_host_has_success_0() -> None:
    odd = unreadable("repos", ValueError("junk"))
    metrics = parse(textfile.render([HostReport("h", True, [odd])], 0.0, 0.0, host_label=False))
    assert metrics["gpurig_drift_last_run_success"] == {(): 0}
    assert set(metrics["gpurig_drift_findings"]) == {
        labels(id="state.unreadable", severity="error"),
        labels(id="state.unreadable", severity="warn"),
    }


def test_label_values_are_escaped() -> None:
    """A name the inventory would refuse still cannot break out of its label."""
    assert textfile.escape_label('a\\b"c\nd') == 'a\\\\b\\"c\\nd'
    report = HostReport(HOSTILE, False, [unreachable("refused")])
    metrics = parse(textfile.render([report], 0.0, 0.0, host_label=True))
    assert metrics["gpurig_drift_last_run_success"] == {labels(host=HOSTILE): 0}
    assert set(metrics) == {
        "gpurig_drift_findings", "gpurig_drift_findings_by_severity",
        "gpurig_drift_last_run_success", "gpurig_drift_last_run_timestamp_seconds",
        "gpurig_drift_last_run_duration_seconds", "gpurig_build_info",
    }  # fmt: skip


def test_a_file_without_host_labels_holds_one_host() -> None:
    with pytest.raises(ValueError, match="exactly one host"):
        textfile.render([DRIFTED, CLEAN], 0.0, 0.0, host_label=False)


def test_write_renames_a_temp_file_from_the_same_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / textfile.FILENAME).write_text("old\n")
    renames: list[tuple[str, str]] = []
    replace = os.replace

    def recording(src: str, dst: str) -> None:
        renames.append((str(src), str(dst)))
        assert Path(dst).read_text() == "old\n"  # the collector reads the old file until now
        replace(src, dst)

    monkeypatch.setattr(os, "replace", recording)
    path = Path(textfile.write(tmp_path, "new 1\n"))
    [(src, dst)] = renames
    assert Path(src).parent == tmp_path and not src.endswith(".prom")  # never collected
    assert (dst, path.read_text()) == (str(tmp_path / "gpurig_drift.prom"), "new 1\n")
    assert path.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpurig_drift.prom"]


def test_cli_local_writes_the_file(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("core_dumps: enabled\npackages: [dpkg, gpurig-test-no-such-package]\n")
    before = time.time()
    args = ["drift", "--local", "--spec", str(spec), "--textfile", str(tmp_path)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    metrics = parse((tmp_path / "gpurig_drift.prom").read_text())
    assert metrics["gpurig_drift_findings"][labels(id="packages.missing", severity="error")] == 1
    assert metrics["gpurig_drift_findings"][labels(id="core_dumps.file", severity="error")] == 0
    [finished] = metrics["gpurig_drift_last_run_timestamp_seconds"].values()
    assert before - 0.001 <= finished <= time.time()
    [duration] = metrics["gpurig_drift_last_run_duration_seconds"].values()
    assert 0 < duration < time.time() - before + 0.001


def test_cli_controller_writes_one_file_with_a_host_label(tmp_path: Path) -> None:
    """Two unreachable loopback hosts: the real controller path, each host labelled."""
    out = tmp_path / "prom"
    out.mkdir()
    args = ["drift", str(inventory(tmp_path, free_port())), "--textfile", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    metrics = parse((out / "gpurig_drift.prom").read_text())
    assert metrics["gpurig_drift_last_run_success"] == {
        labels(host="dead"): 0,
        labels(host="also-dead"): 0,
    }
    assert (
        metrics["gpurig_drift_findings"][
            labels(host="dead", id="host.unreachable", severity="error")
        ]
        == 1
    )


def test_cli_refuses_a_missing_directory_before_reading_anything(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("core_dumps: enabled\n")
    args = ["drift", "--local", "--spec", str(spec), "--textfile", str(tmp_path / "nope")]
    result = CliRunner().invoke(main, args)
    assert (result.exit_code, result.stdout) == (2, "")
    assert "does not exist" in result.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="what root writes")
def test_root_writes_the_file_only_where_root_alone_can(private_dir: Path) -> None:
    """A node contract's --textfile as root: never into, nor through a link of, a directory
    another account can change (she would re-point it at a root file)."""
    theirs = private_dir / "alice"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    (private_dir / "collector").mkdir()
    (theirs / "collector").symlink_to(private_dir / "collector")
    for where in (theirs, theirs / "collector"):
        with pytest.raises(PermissionError, match="uid 65534 can change it"):
            textfile.write(where, "gpurig_up 1\n")
    assert (
        list((private_dir / "collector").iterdir()) == []
        and not (theirs / textfile.FILENAME).exists()
    )
    (private_dir / "link").symlink_to(private_dir / "collector")
    assert textfile.write(private_dir / "link", "x 1\n") == str(
        private_dir / "collector" / textfile.FILENAME
    )
