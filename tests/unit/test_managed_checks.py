"""The converge's last judge (gpurig.checks.managed, deploys/managed.py): an error drift would
still report about what the converge manages and cannot fix fails the converge, in drift's
words, judged over the converge's one read, or, where the run changed that concern, over a
fresh read of that rule's facts alone. The real deploy on this machine:
tests/unit/test_converge_leaves_no_error.py."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpurig.checks import managed
from gpurig.checks.all import CHECK_IDS
from gpurig.checks.judge import drift_reads
from gpurig.checks.rules import rules
from gpurig.deploys.managed import refusal
from gpurig.facts.gpurig_container import ContainerInspect
from gpurig.facts.gpurig_node import EngineSocket, LoginShell
from gpurig.facts.gpurig_nvidia import GpuHealth, KernelLog, NvidiaGpus
from gpurig.facts.gpurig_repo import EnvImports
from gpurig.facts.round_trip import Unreadable, read_key
from gpurig.plans import CHANGE_IDS
from gpurig.plans import converge_reads as plans_reads
from gpurig.report.render import one_line
from gpurig.spec.model import normalise
from tests.unit.fact_values import reader

ROOT = Path(__file__).resolve().parents[2]
SPEC = normalise(
    {
        "engine": "podman",
        "podman_socket": True,
        "core_dumps": "disabled",
        "containers": {"train": {"image": "r/x@sha256:" + "a" * 64}},
        "repos": {"/srv/code": {"url": "https://example.org/c.git", "ref": "b" * 40,
                                "python": {"lockfile": "uv.lock", "imports": ["torch"]}}},
    }
)  # fmt: skip
WHERE = {"file": "~/.profile", "line": 12, "command": "ulimit -c unlimited"}
NOT_RUN = {"python": "/srv/code/.venv/bin/python", "ran": False, "run_as": None, "refused": None,
           "report": None, "error": None}  # fmt: skip
CLEAN: dict[type, Any] = {
    LoginShell: {"ulimit_c": "0", "where": None},
    EngineSocket: {"exists": True, "answers": True},
    EnvImports: {"/srv/code": NOT_RUN},
}
RAISED = {**CLEAN, LoginShell: {"ulimit_c": "unlimited", "where": WHERE}}
SILENT = {**CLEAN, EngineSocket: {"exists": True, "answers": False}}


def keys(reads: list) -> set[str]:
    return {read_key(cls, kwargs) for cls, kwargs in reads}


def test_the_converge_reads_the_managed_rules_facts_in_its_one_read_and_no_other_checks():
    """One read still: the plans' facts and these rules' (a login shell, the Podman socket's
    answer, the declared imports), none of drift's GPU, kernel log or disk reads."""
    converge, plans = keys(managed.converge_reads(SPEC)), keys(plans_reads(SPEC))
    assert converge - plans == keys(managed.reads(SPEC)) - plans
    assert {cls for cls, _ in managed.reads(SPEC)} == {LoginShell, EngineSocket, EnvImports}
    assert converge <= keys(drift_reads(SPEC))  # nothing drift does not read itself
    for fact in (GpuHealth, KernelLog):
        assert read_key(fact, {}) not in converge
    assert not keys(managed.reads(normalise({"core_dumps": "enabled"})))


@pytest.mark.parametrize(
    ("changed", "stale"),
    [({"core_dumps"}, {LoginShell}), ({"engine"}, {LoginShell, EngineSocket}),
     ({"repo"}, {EnvImports}), ({"cleanup"}, {EnvImports}), ({"packages", "container"}, set())],
)  # fmt: skip
def test_after_a_change_only_the_rules_it_touched_read_again(changed: set, stale: set) -> None:
    assert {cls for cls, _ in managed.reads(SPEC, changed)} == stale


def ids(found: list) -> list[str]:
    return [f.id for f in found]


def test_an_error_left_on_the_one_read_is_the_converges() -> None:
    assert managed.left(SPEC, reader(CLEAN)) == []
    [found] = managed.left(SPEC, reader(RAISED))
    assert (found.id, found.severity) == ("core_dumps.login_shell", "error")
    assert found.message.startswith(
        "~/.profile:12 `ulimit -c unlimited` raises the limit after /etc/profile.d/gpurig-core.sh"
    )
    assert ids(managed.left(SPEC, reader(SILENT))) == ["engine.api"]
    # A change elsewhere leaves the rule judged over the one read.
    assert ids(managed.left(SPEC, reader(RAISED), {"packages"}, reader(CLEAN))) == [
        "core_dumps.login_shell"
    ]


def test_a_rule_whose_concern_changed_is_judged_on_the_state_after_the_change() -> None:
    """The converge rewrote gpurig's block: the login shell read again says 0, the one read's
    `unlimited` is history. While pyinfra only prepares (no read after), it waits."""
    assert managed.left(SPEC, reader(RAISED), {"core_dumps"}, reader(CLEAN)) == []
    assert ids(managed.left(SPEC, reader(CLEAN), {"core_dumps"}, reader(RAISED))) == [
        "core_dumps.login_shell"
    ]
    assert managed.left(SPEC, reader(RAISED), {"core_dumps"}) == []  # preparing


def test_only_errors_about_what_the_converge_manages_count() -> None:
    """A warning (imports unchecked) and what is no business of the converge (GPU, disk: no
    rule here reads them) leave it alone; a fact it cannot parse is drift's unreadable error."""
    unchecked = {**CLEAN, EnvImports: {"/srv/code": {**NOT_RUN, "refused": "writable"}}}
    assert managed.left(SPEC, reader(unchecked)) == []
    odd = {**CLEAN, LoginShell: Unreadable("LoginShell: unexpected line: 'x'")}
    assert ids(managed.left(SPEC, reader(odd))) == ["state.unreadable"]
    assert set(managed.IDS).isdisjoint(CHANGE_IDS) and set(managed.IDS) <= set(CHECK_IDS)
    assert {rules()["checks"][i]["severity"] for i in managed.IDS} == {"error"}
    for rule, _ in managed.MANAGED:  # a KeyError: the rule read a fact not answered here
        list(rule(SPEC, reader({**CLEAN, NvidiaGpus: None, ContainerInspect: None})))


def test_the_refusal_prints_each_error_in_drifts_words_and_fails(tmp_path: Path) -> None:
    odd = {**RAISED, LoginShell: {"ulimit_c": "unlimited\x1b[2J", "where": WHERE}}
    found = managed.left(SPEC, reader(odd)) + managed.left(SPEC, reader(SILENT))
    done = subprocess.run(["sh", "-c", refusal(found)], capture_output=True, text=True)
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[0] == f"gpurig: {one_line(found[0])}".replace("\x1b", "\\x1b")
    assert lines[1] == f"gpurig: {one_line(found[1])}"
    assert len(lines) == 2
