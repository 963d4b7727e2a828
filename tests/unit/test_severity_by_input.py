"""Where the reading decides a finding's severity or remediation (an Xid's bucket, an SXid's
category, a threshold), `gpurig explain` and the finding's page list which readings give which:
each row is what the check itself reports for those readings, and every reading the tables
know is in a row."""

from __future__ import annotations

import re
from typing import Any

from gpurig.checks import compat, gpu, interconnect, node
from gpurig.checks.rules import ByInput, rules
from gpurig.data.tables import table
from gpurig.facts.gpurig_nvidia import KernelLog
from gpurig.report import explain
from tests.unit.fact_values import h100_vm, reader

UNLISTED = 999  # no Xid or SXid table has it


def judged(log: str, check: Any) -> dict[tuple[int, str], set[tuple[str, str]]]:
    """(code, line's tail) -> {(severity, remediation)} the check reports on kernel log lines."""
    values = {**h100_vm(), KernelLog: KernelLog.parse({"gpu_lines": log})}
    got: dict[tuple[int, str], set[tuple[str, str]]] = {}
    for finding in check({}, reader(values)):
        code = int(re.search(r"Xid (\d+)", finding.message)[1])  # type: ignore[index]
        got.setdefault((code, finding.actual), set()).add((finding.severity, finding.remediation))
    return got


def row_for(rows: list[ByInput], severity: str, remedy: str) -> ByInput:
    (row,) = [r for r in rows if (r.severity, r.remediation) == (severity, remedy)]
    return row


def test_every_xid_is_listed_with_what_the_check_reports() -> None:
    codes = [x for x in rules()["xids"] if x not in (79, 154)] + [UNLISTED]
    actions = list(rules()["recovery_actions"])
    lines = [f"NVRM: Xid (PCI:0000:9b:00): {x}, pid=1, name=python, event" for x in codes]
    lines += [
        f"NVRM: Xid (PCI:0000:9b:00): 154, GPU recovery action changed ({a})" for a in actions
    ]
    found = judged("\n".join(lines), gpu._kernel_log)
    rows = explain.entry("gpu.xid").by_input
    assert [r.severity for r in rows] == sorted((r.severity for r in rows), key="error".__ne__)
    hit = set()
    for (code, actual), judgements in found.items():
        ((severity, remedy),) = judgements
        row = row_for(list(rows), severity, remedy)
        hit.add(row)
        if code == UNLISTED:
            assert "an Xid not in the catalog table" in row.when
        elif code == 154:
            assert any(f"154 ({a})" in row.when for a in actions if f"({a})" in actual), actual
        else:
            assert re.search(rf"(?<![\d(]){code}(?![\d)])", row.when), (code, row)
    assert hit == set(rows)  # no row claims what the check never gives
    assert {code for code, _ in found} == {*codes, 154}
    # Xid 154: one finding per remediation its actions give
    assert len(found) - len(codes) == len({gpu._recovery_remedy(a) for a in actions})
    # each catalog code in one row only
    assert sum(len(re.findall(r"\b\d+\b(?! \()", r.when)) for r in rows) == len(codes) - 1
    assert explain.entry("gpu.xid").severity == "error or warn"


def test_the_xid_page_and_explain_say_which_buckets_give_which() -> None:
    text = explain.as_text(explain.entry("gpu.xid"))
    assert "Severity: error or warn" in text
    assert re.search(r"error, reset-gpu: Xid [\d, ]*\b48\b", text)
    assert re.search(r"warn, restart-job: Xid [\d, ]*\b13\b", text)


def test_every_sxid_is_listed_with_what_the_check_reports() -> None:
    data = table("interconnect.yaml")
    words = [*data["unlisted"], ""]
    lines = [f"nvidia-nvswitch0: SXid (PCI:0000:05:00.0): {s}, Link 1" for s in data["sxids"]]
    lines += [f"nvidia-nvswitch0: SXid (PCI:0000:0{i}:00.0): {UNLISTED}, {w}, Link 1"
              for i, w in enumerate(words)]  # fmt: skip
    found = judged("\n".join(lines), interconnect._sxids)
    rows = explain.entry("gpu.sxid").by_input
    for (code, actual), ((severity, remedy),) in [(k, tuple(v)) for k, v in found.items()]:
        row = row_for(list(rows), severity, remedy)
        if code == UNLISTED:
            word = next((w for w in data["unlisted"] if f", {w}," in actual), "")
            assert f"not in the table logged {word or 'with neither word'}" in row.when
        else:
            assert re.search(rf"\b{code}\b", row.when), (code, row)
    assert len(found) == len(data["sxids"]) + len(words)


def test_thresholded_ids_give_the_table_levels() -> None:
    for check_id, limits in (("host.cgroup_leak", "cgroups"), ("host.percpu_memory", "percpu_gb")):
        bound = rules()["thresholds"][limits]
        rows = explain.entry(check_id).by_input
        for row in rows:
            above = int(re.search(r"more than (\d+)", row.when)[1])  # type: ignore[index]
            assert above == bound[row.severity]
            assert node._level(above + 1, bound) == row.severity
            assert node._level(above, bound) != row.severity


def test_recovery_actions_give_their_remediation() -> None:
    rows = explain.entry("gpu.recovery_action").by_input
    for action, remedy in rules()["recovery_actions"].items():
        if action != "None":
            assert action in row_for(list(rows), "error", remedy or "contact-provider").when
    assert explain.entry("gpu.recovery_action").severity == "error"


def test_compat_ids_give_the_severities_their_rows_say() -> None:
    rows = {r.severity: r for r in explain.entry("compat.driver_cuda").by_input}
    assert "12.x: 525.60.13" in rows["error"].when
    outcomes = {
        "below the 12.x floor": compat.check_driver_cuda("525.60.12", "12.4"),
        "between the floor and 12.4's own minimum": compat.check_driver_cuda("535.54.03", "12.4"),
        "a release not in the table": compat.check_driver_cuda("999.0", "12.99"),
    }
    assert [f.severity for found in outcomes.values() for f in found] == ["error", "warn", "warn"]
    rows = {r.severity: r for r in explain.entry("compat.torch_arch").by_input}
    assert set(rows) == {"error", "warn"}
    ptx_only = compat.check_torch_arch(["sm_80", "compute_80"], "9.0")
    assert [f.severity for f in ptx_only] == ["warn"] and "only PTX fits" in rows["warn"].when
    no_jit = compat.check_torch_arch(["sm_80", "compute_80"], "9.0", ptx_jit=False)
    nothing = compat.check_torch_arch(["sm_80"], "9.0")
    assert [f.severity for f in no_jit + nothing] == ["error", "error"]
    assert explain.entry("compat.torch_arch").severity == "error or warn"
