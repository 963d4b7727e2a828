"""Report formats: the JSON contract, JUnit XML that parses, Markdown, the table, exit codes;
every format says what a finding is about and what the converge does, a subject's findings
together, a recreated container's fields in one block with the fix said once."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from gpurig.plans.change import Change, findings
from gpurig.report.render import (
    HostReport,
    exit_code,
    render,
    to_json,
    to_junit,
    to_markdown,
    to_table,
)
from gpurig.spec.finding import Finding

ERROR = Finding("repo.crlf", "error", "CRLF scripts", "LF line endings", "run.sh", "convert them")
WARN = Finding("repo.dirty", "warn", "uncommitted", "clean", " M a|b.py", "commit them")
OPT_IN = "stop its job first, or opt in with `--data allow_recreate=true`"
RECREATED = findings(
    [
        Change(f"container.{field}", "container train", wanted, found, OPT_IN, refused=True,
               field=field)
        for field, wanted, found in (
            ("shm_size", "512 GiB", "64 MiB"), ("user", "root", "(image default)"),
            ("ulimits", "core=0:0 nofile=1024:20000", "core=(unset) nofile=(unset)"),
        )
    ]
)[0]  # fmt: skip
SOCKET = findings(
    [Change("engine.socket", "podman.socket", "active, enabled", "inactive, enabled",
            "enable and start podman.socket")]
)[0]  # fmt: skip
THROTTLE = Finding("gpu.throttle", "warn", "GPU clocks are held down", "no slowdown", "hw_slowdown",
                   "check cooling", "contact-provider", "GPU 00000000:01:00.0")  # fmt: skip
DOWN = Finding("host.unreachable", "error", "cannot connect", "SSH connection", "refused", "fix it")
REPORTS = [
    HostReport("a100-1", True, [ERROR, WARN]),
    HostReport("pod-7", True, [WARN]),
    HostReport("h100", False, [DOWN]),
    HostReport("clean", True, []),
]


def test_json_is_exactly_the_contract() -> None:
    doc = json.loads(to_json(REPORTS))
    assert list(doc) == ["hosts"]
    assert [(h["name"], h["reachable"]) for h in doc["hosts"]] == [
        ("a100-1", True), ("pod-7", True), ("h100", False), ("clean", True),
    ]  # fmt: skip
    assert doc["hosts"][0]["findings"][0] == {
        "id": "repo.crlf", "severity": "error", "message": "CRLF scripts",
        "expected": "LF line endings", "actual": "run.sh", "fix": "convert them",
        "subject": "", "action": "manual", "differences": [],
    }  # fmt: skip


def test_json_adds_subject_action_and_differences_to_the_old_keys() -> None:
    [row] = json.loads(to_json([HostReport("full-1", True, [RECREATED])]))["hosts"][0]["findings"]
    assert list(row)[:6] == ["id", "severity", "message", "expected", "actual", "fix"]
    assert (row["id"], row["subject"], row["action"]) == (
        "container.differs", "container train", "refused",
    )  # fmt: skip
    assert row["differences"][0] == {
        "field": "shm_size", "expected": "512 GiB", "actual": "64 MiB", "id": "container.shm_size"
    }  # fmt: skip
    assert row["remediation"] == "by-hand" and row["fix"] == OPT_IN


def test_junit_one_testcase_per_host_one_failure_per_error() -> None:
    suite = ET.fromstring(to_junit(REPORTS).split("?>", 1)[1])
    assert suite.tag == "testsuite"
    assert (suite.get("tests"), suite.get("failures")) == ("4", "2")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["a100-1", "pod-7", "h100", "clean"]
    assert [len(c.findall("failure")) for c in cases] == [1, 0, 1, 0]
    failure = cases[0].find("failure")
    assert failure is not None and failure.get("type") == "repo.crlf"
    assert "fix: convert them" in (failure.text or "")
    assert "repo.dirty" in (cases[1].findtext("system-out") or "")


def test_markdown_has_a_verdict_and_escapes_pipes() -> None:
    text = to_markdown(REPORTS)
    assert text.startswith("## gpurig drift: drift on 2 of 4 hosts\n")
    assert "### `h100` (unreachable)" in text
    row = "| warn | host | the converge cannot fix it | `repo.dirty` | "
    assert row + "uncommitted · expected clean; found  M a\\|b.py | commit them |" in text
    assert "- `clean`: ok" in text
    assert to_markdown([REPORTS[3]]).startswith("## gpurig drift: no drift")


def test_table_colours_only_when_asked() -> None:
    plain = to_table(REPORTS)
    assert "\033[" not in plain
    assert "a100-1  error  host: the converge cannot fix it (repo.crlf)" in plain
    assert plain.endswith(
        "4 hosts, 2 with drift\n"
        "what a finding means and what to do: gpurig explain ID (e.g. repo.crlf)\n"
    )
    assert "\033[31merror" in to_table(REPORTS, colour=True)


def test_exit_code_warnings_pass_errors_and_unreachable_fail() -> None:
    assert exit_code([REPORTS[1], REPORTS[3]]) == 0
    assert exit_code([REPORTS[0]]) == 1
    assert exit_code([REPORTS[2]]) == 1


def test_render_dispatches_every_format() -> None:
    assert render(REPORTS, "json") == to_json(REPORTS)
    assert render(REPORTS, "junit") == to_junit(REPORTS)
    assert render(REPORTS, "markdown") == to_markdown(REPORTS)
    assert render(REPORTS, "table") == to_table(REPORTS)


def test_fleet_view_flags_mixed_kernels_without_failing_the_run():
    facts = {"driver": "570.124.06", "kernel": "6.8.0-48"}
    reports = [
        HostReport("a", True, [], facts),
        HostReport("b", True, [], facts),
        HostReport("c", True, [], {**facts, "kernel": "6.8.0-51"}),
    ]
    fleet = json.loads(render(reports, "json"))["fleet"]
    assert [f["id"] for f in fleet["findings"]] == ["fleet.mixed_kernel"]
    assert "c: 6.8.0-51" in fleet["findings"][0]["actual"]
    assert "fleet.mixed_kernel" in render(reports, "table")
    assert "`fleet.mixed_kernel`" in render(reports, "markdown")
    assert exit_code(reports) == 0


def test_remediation_travels_in_every_format():
    finding = Finding("gpu.xid", "error", "Xid 79", "no Xid", "Xid 79", "drain it", "reboot")
    reports = [HostReport("a", True, [finding])]
    assert json.loads(render(reports, "json"))["hosts"][0]["findings"][0]["remediation"] == "reboot"
    assert "[reboot] drain it" in render(reports, "table")
    assert "\\[reboot\\] drain it" in render(reports, "markdown")


def test_a_recreated_container_is_one_block_naming_it_with_the_fix_once() -> None:
    reports = [HostReport("full-1", True, [RECREATED]), HostReport("full-2", True, [SOCKET])]
    table = to_table(reports)
    assert table.splitlines() == [
        "full-1  error  container train: the converge refuses (container.differs)",
        "               FIELD     EXPECTED                    FOUND",
        "               shm_size  512 GiB                     64 MiB",
        "               user      root                        (image default)",
        "               ulimits   core=0:0 nofile=1024:20000  core=(unset) nofile=(unset)",
        f"               fix: [by-hand] {OPT_IN}",
        "full-2  error  podman.socket: the converge fixes it (engine.socket)",
        "               expected active, enabled; found inactive, enabled",
        "               fix: [reconverge] run the converge: it will enable and start podman.socket",
        "2 hosts, 2 with drift",
        "what a finding means and what to do: gpurig explain ID (e.g. container.differs)",
    ]


def test_the_explain_hint_only_follows_findings_and_json_keeps_its_keys() -> None:
    clean = HostReport("clean", True)
    assert to_table([clean]).splitlines()[-1] == "1 host, 0 with drift"
    reports = [HostReport("full-1", True, [SOCKET])]
    assert to_table(reports).splitlines()[-1].startswith("what a finding means")
    assert "explain" not in to_json(reports)
    assert list(json.loads(to_json(reports))) == ["hosts"]


def test_every_row_says_its_subject_and_what_the_converge_does() -> None:
    reports = [HostReport("full-1", True, [RECREATED, THROTTLE, SOCKET])]
    markdown = [line for line in to_markdown(reports).splitlines() if line.startswith("| ")][2:]
    assert [row.split(" | ")[1:3] for row in markdown] == [
        ["container train", "the converge refuses"],
        ["GPU 00000000:01:00.0", "the converge cannot fix it"],
        ["podman.socket", "the converge fixes it"],
    ]
    assert markdown[0].count("stop its job first") == 1
    assert "shm\\_size: expected 512 GiB; found 64 MiB · user: expected root" in markdown[0]
    assert "GPU clocks are held down · expected no slowdown; found hw\\_slowdown" in markdown[1]
    suite = ET.fromstring(to_junit(reports).split("?>", 1)[1])
    failures = suite.findall("testcase/failure")
    assert [f.get("message") for f in failures] == [
        "container train: the converge refuses (container.differs)",
        "podman.socket: the converge fixes it (engine.socket)",
    ]
    assert (failures[0].text or "").count("stop its job first") == 1
    assert "GPU 00000000:01:00.0" in (suite.findtext("testcase/system-out") or "")


def test_a_subjects_findings_are_reported_together() -> None:
    crash = Finding("container.restarting", "warn", "crashes", "0 restarts", "3 restarts",
                    "read the logs", subject="container train")  # fmt: skip
    report = HostReport("full-1", True, [RECREATED, SOCKET, crash])
    assert [f.id for f in report.by_subject] == [
        "container.differs",
        "container.restarting",
        "engine.socket",
    ]
