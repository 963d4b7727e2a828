"""The shipped alerting rules (examples/prometheus/gpurig-rules.yml) under Prometheus' own
`promtool test rules` (Debian's prometheus package), against the series gpurig's textfile
writer produced here: a real `drift --local` run that finds drift, and one that could not
check. A rule whose expression names a series the writer does not write, or a label it does
not carry, fails here."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
from test_cli_drift import free_port, inventory

from gpurig.cli.main import main
from gpurig.report import textfile
from gpurig.spec.finding import HostReport

RULES = Path(__file__).parents[2] / "examples" / "prometheus" / "gpurig-rules.yml"


def written(out: Path, args: list[str]) -> list[tuple[str, dict[str, str], float]]:
    """(metric, labels, value) of each sample the writer put in a real run's textfile."""
    out.mkdir()
    CliRunner().invoke(main, ["drift", *args, "--textfile", str(out)])
    text = (out / "gpurig_drift.prom").read_text()
    return [(s.name, s.labels, s.value) for f in text_string_to_metric_families(text)
            for s in f.samples]  # fmt: skip


def series(samples: list[tuple[str, dict[str, str], float]], instance: str) -> list[dict]:
    """promtool's input_series: each sample held for an hour, a scrape a minute, as
    node_exporter's textfile collector serves it; the run's timestamp rebased to promtool's
    clock, which starts at 0 (the run finished at minute 0)."""
    found = []
    for name, labels, value in samples:
        if name == "gpurig_drift_last_run_timestamp_seconds":
            value = 0.0
        tags = ",".join(f'{k}="{v}"' for k, v in sorted({**labels, "instance": instance}.items()))
        found.append({"series": f"{name}{{{tags}}}", "values": f"{value:g}x300"})
    return found


def test_the_shipped_rules_fire_on_what_gpurig_writes(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("packages: [gpurig-test-no-such-package]\n")
    drifted = written(tmp_path / "drifted", ["--local", "--spec", str(spec)])
    [errors] = [
        v
        for n, labels, v in drifted
        if n == "gpurig_drift_findings_by_severity" and labels["severity"] == "error"
    ]
    assert errors > 0  # fmt: skip
    # the controller's run over a host that does not answer (loopback, a closed port)
    unreadable = written(tmp_path / "unreadable", [str(inventory(tmp_path, free_port()))])
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    described = {rule["alert"]: rule["annotations"]["description"] for rule in rules}
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series(drifted, "drifted"),
                "alert_rule_test": [
                    {"eval_time": "14m", "alertname": "GpurigDrift", "exp_alerts": []},
                    {
                        "eval_time": "20m",
                        "alertname": "GpurigDrift",
                        "exp_alerts": [{"exp_labels": {
                            "severity": "warning", "instance": "drifted"},
                            "exp_annotations": {
                                "summary": f"drifted: {errors:g} gpurig error findings",
                                "description": described["GpurigDrift"]}}],
                    },
                    {"eval_time": "20m", "alertname": "GpurigCouldNotCheck", "exp_alerts": []},
                    {"eval_time": "2h", "alertname": "GpurigRunStale", "exp_alerts": []},
                    {
                        "eval_time": "4h",
                        "alertname": "GpurigRunStale",
                        "exp_alerts": [{"exp_labels": {
                            "severity": "warning", "instance": "drifted"},
                            "exp_annotations": {
                                "summary": "drifted: no gpurig run for 4h 0m 0s",
                                "description": described["GpurigRunStale"]}}],
                    },
                ],
            }
        ],
    }  # fmt: skip
    assert any(n == "gpurig_drift_last_run_success" and v == 0 for n, _, v in unreadable)
    tests["tests"].append(
        {
            "interval": "1m",
            "input_series": series(unreadable, "unreadable"),
            "alert_rule_test": [
                {
                    "eval_time": "20m",
                    "alertname": "GpurigCouldNotCheck",
                    "exp_alerts": [
                        {
                            "exp_labels": {
                                "severity": "warning",
                                "instance": "unreadable",
                                "host": h,
                            },
                            "exp_annotations": {
                                "summary": f"unreadable host {h}: gpurig could not check the host",
                                "description": described["GpurigCouldNotCheck"],
                            },
                        }
                        for h in ("also-dead", "dead")  # the controller labels each host
                    ],
                }
            ],
        }
    )
    # What a health check writes: the writer's own families, a drain withheld and one not.
    for withheld in (True, False):
        node = [HostReport("node", True)]
        extra = textfile.contract_families(withheld, {})
        text = textfile.render(node, 0.0, 0.1, False, extra=extra)
        held = [(s.name, s.labels, s.value)
                for f in text_string_to_metric_families(text) for s in f.samples]  # fmt: skip
        name = "withheld" if withheld else "drained"
        fired = [{"exp_labels": {"severity": "critical", "instance": name},
                  "exp_annotations": {
                      "summary": f"{name}: gpurig withheld a drain (the drain budget is spent)",
                      "description": described["GpurigDrainWithheld"]}}]  # fmt: skip
        tests["tests"].append(
            {
                "interval": "1m",
                "input_series": series(held, name),
                "alert_rule_test": [
                    {
                        "eval_time": "5m",
                        "alertname": "GpurigDrainWithheld",
                        "exp_alerts": fired if withheld else [],
                    }
                ],
            }
        )
    path = tmp_path / "rules_test.yml"
    path.write_text(yaml.safe_dump(tests))
    done = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
