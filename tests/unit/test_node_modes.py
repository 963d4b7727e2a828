"""The node contracts (gpurig/node/modes.py): what each mode reads and reports, its verdict,
exit statuses, NPD's line, the drain reason, `scontrol show node` read strictly, and what the
health check does to a node in each state. `gpurig drift --local --mode` on this machine too."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpurig.checks.all import CHECK_IDS
from gpurig.checks.node import unreachable
from gpurig.cli.main import main
from gpurig.data.tables import table
from gpurig.node import modes as node_modes
from gpurig.node.argv import MODES
from gpurig.node.modes import NodeState, health_action, mode, parse_nodes
from gpurig.plans import CHANGE_IDS, PLANS
from gpurig.spec.finding import Finding, HostReport

PLANS_DIR = Path(node_modes.__file__).parents[1] / "plans"
HOSTILE = "\x1b[2J evil\nline ) Reason=x [root@2020-01-01T00:00:00]"


def error(fid: str, message: str = "m") -> object:
    return Finding(fid, "error", message, "e", "a", "fix")


def warn(fid: str) -> object:
    return Finding(fid, "warn", "m", "e", "a", "fix")


CLEAN = HostReport("n1", True, [warn("cleanup.core_files")])
DRIFTED = HostReport("n1", True, [error("core_dumps.file", HOSTILE), error("core_dumps.file")])
UNREAD = HostReport("n1", True, [error("state.unreadable")])
DOWN = HostReport("n1", False, [unreachable("no answer within 3 s")])


def test_the_command_line_names_every_mode_the_table_defines() -> None:
    assert set(MODES) == set(table("node_modes.yaml")["modes"])


@pytest.mark.parametrize("name", MODES)
def test_each_mode_loads_with_known_plans_and_a_time_within_its_limit(name: str) -> None:
    m = mode(name)
    assert m.scope.plans <= {plan for plan, _ in PLANS}
    assert 0 < m.read_seconds < m.limit_seconds


def test_the_health_check_acts_within_slurm_s_60_s() -> None:
    from gpurig.node import slurm

    m = mode("healthcheck")
    assert m.limit_seconds == 60
    # gpurig's start (about 1 s), the read, then at most `show` and `update`.
    assert 1 + m.read_seconds + 2 * slurm.TIMEOUT < m.limit_seconds


def test_fast_modes_leave_out_checkouts_cleanup_and_containers() -> None:
    for name in ("prolog", "npd"):
        ids = set(node_modes.checked_ids(mode(name)))
        assert "core_dumps.file" in ids and "disk.free" in ids and "gpu.xid" in ids
        assert not {i for i in ids if i.startswith(("repo.", "cleanup.", "container."))}
        assert not ids & {"env.imports", "compat.torch_arch", "host.unreachable"}
    health = set(node_modes.checked_ids(mode("healthcheck")))
    assert health == (set(CHANGE_IDS) | set(CHECK_IDS)) - node_modes.CONNECT_CHECKS


def test_every_change_id_belongs_to_the_plan_that_writes_it() -> None:
    for change_id in CHANGE_IDS:
        plan = node_modes.plan_of(change_id)
        assert plan in {name for name, _ in PLANS}
        source = (PLANS_DIR / f"{plan}.py").read_text()
        literal = f'"{change_id}"' in source
        assert literal or change_id.startswith("container."), (change_id, plan)


def test_verdict_and_exit_status_per_mode() -> None:
    assert node_modes.verdict(CLEAN) == "ok"  # warnings alone pass
    assert node_modes.verdict(DRIFTED) == "problem"
    assert node_modes.verdict(UNREAD) == "unknown"
    assert node_modes.verdict(DOWN) == "unknown"
    # A problem found in the part that was read still counts.
    assert node_modes.verdict(HostReport("n1", True, [*UNREAD.findings, error("disk.free")])) == (
        "problem"
    )
    codes = {n: [node_modes.exit_status(mode(n), v) for v in ("ok", "problem", "unknown")]
             for n in MODES}  # fmt: skip
    assert codes == {"prolog": [0, 1, 0], "healthcheck": [0, 1, 2], "npd": [0, 1, 2]}


def test_npd_line_is_one_line_of_at_most_80_with_ids_only() -> None:
    m = mode("npd")
    assert node_modes.npd_line(CLEAN, m) == "gpurig: ok"
    assert node_modes.npd_line(DRIFTED, m) == "gpurig: core_dumps.file"
    many = HostReport("n1", True, [error(i) for i in sorted(CHANGE_IDS)])
    line = node_modes.npd_line(many, m)
    assert len(line) <= 80 and "\n" not in line
    assert re.fullmatch(r"gpurig: [a-z_.]+( [a-z_.]+)* \(\+\d+ more\)", line), line
    assert node_modes.npd_line(DOWN, m) == "gpurig: could not check: host.unreachable"


def test_ids_past_the_budget_are_counted_in_words() -> None:
    assert node_modes.summary(["core_dumps.file"], 8) == "1 finding"
    assert node_modes.summary(["core_dumps.file", "disk.free"], 8) == "2 findings"


def test_drain_reason_is_gpurig_prefix_and_ids_within_120() -> None:
    assert node_modes.drain_reason(["core_dumps.file"]) == "gpurig: core_dumps.file"
    reason = node_modes.drain_reason(sorted(CHANGE_IDS))
    assert reason.startswith("gpurig: ") and len(reason) <= 120 and "more)" in reason
    # The ids read back from the reason: those it names, not the count of the rest.
    ids = node_modes.reason_ids(reason)
    assert ids and ids < set(CHANGE_IDS) and not any("more" in i for i in ids)
    assert node_modes.reason_ids("fan check") is None and node_modes.reason_ids(None) is None


def test_detail_lines_escape_host_text() -> None:
    lines = node_modes.detail_lines(DRIFTED, "gpurig prolog")
    assert len(lines) == 2 and all("\n" not in line and "\x1b" not in line for line in lines)
    assert lines[0].startswith("gpurig prolog: core_dumps.file: \\x1b[2J evil\\nline")


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def recorded(name: str) -> str:
    """`scontrol show node NAME --oneliner` recorded from SLURM 22.05.8 (fixtures/slurm)."""
    return (FIXTURES / f"show-node_{name}_22.05.8.txt").read_text()


def parse_node(text: str) -> NodeState:
    [node] = parse_nodes(text)
    return node


def test_scontrol_lines_are_read_strictly() -> None:
    assert parse_node(recorded("idle")) == NodeState(
        "slurm-2", frozenset({"IDLE"}), None, frozenset({"debug"})
    )
    node = parse_node(recorded("idle-not-responding"))
    assert node.flags == {"IDLE", "NOT_RESPONDING"} and not node.drained and node.reason is None
    node = parse_node(recorded("drain-gpurig"))
    assert node.drained and node.reason == "gpurig: test.id"
    node = parse_node(recorded("drain-prolog-error"))
    assert node.flags == {"IDLE", "DRAIN"} and node.reason == "Prolog error"
    assert parse_node(recorded("drain-operator")).reason == "fan [rack 3] noisy"
    idle = recorded("idle")
    for bad in ("", idle + idle, recorded("unknown-node"), idle.replace("State=", "Sta=")):
        with pytest.raises(ValueError):
            parse_nodes(bad)


def test_every_node_s_line_is_read_with_its_partitions() -> None:
    nodes = parse_nodes((FIXTURES / "show-nodes_idle_22.05.8.txt").read_text())
    assert [(n.name, n.flags, n.reason, n.partitions) for n in nodes] == [
        (name, frozenset({"IDLE"}), None, frozenset({"debug"})) for name in ("slurm-1", "slurm-2")
    ]
    assert [n.held.ids for n in nodes] == [None, None]


def test_health_check_drains_resumes_and_leaves_others_drains() -> None:
    idle = parse_node(recorded("idle"))
    gpurig = recorded("drain-gpurig")
    ours = parse_node(gpurig.replace("gpurig: test.id", "gpurig: core_dumps.file"))
    ours_other = parse_node(gpurig.replace("gpurig: test.id", "gpurig: disk.free"))
    theirs = parse_node(recorded("drain-prolog-error"))
    admin = parse_node(recorded("drain-operator"))
    drain = ["core_dumps.file"]
    assert health_action(idle, DRIFTED, drain) == ("drain", "gpurig: core_dumps.file")
    assert health_action(ours, DRIFTED, drain) is None  # already drained with this reason
    assert health_action(ours_other, DRIFTED, drain) == ("drain", "gpurig: core_dumps.file")
    assert health_action(theirs, DRIFTED, drain) is None
    assert health_action(ours, CLEAN, []) == ("resume", "")
    # Errors the policy only reports: never a drain, and gpurig's own drain is lifted.
    assert health_action(idle, DRIFTED, []) is None
    assert health_action(ours, DRIFTED, []) == ("resume", "")
    for node in (idle, theirs, admin):
        assert health_action(node, CLEAN, []) is None
    for node in (idle, ours, theirs):
        assert health_action(node, UNREAD, []) is None and health_action(node, DOWN, []) is None
    # A report-only error found beside a part not read: nothing is lifted either.
    partly = HostReport("n1", True, [*UNREAD.findings, error("core_dumps.file")])
    assert health_action(ours, partly, []) is None


def drift(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["drift", *args])
    return result.exit_code, result.stdout, result.stderr


def test_npd_mode_on_this_machine(tmp_path: Path) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text("core_dumps: enabled\npackages: [dpkg]\n")
    code, out, _ = drift("--local", "--spec", str(spec), "--mode", "npd")
    assert (code, out) == (0, "gpurig: ok\n")
    spec.write_text("core_dumps: enabled\npackages: [dpkg, gpurig-test-no-such-package]\n")
    code, out, _ = drift("--local", "--spec", str(spec), "--mode", "npd")
    assert (code, out) == (1, "gpurig: packages.missing\n")


def test_a_bad_spec_never_fails_a_prolog_and_is_unknown_to_npd(tmp_path: Path) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text("core_dumps: maybe\n")
    code, out, err = drift("--local", "--spec", str(spec), "--mode", "prolog")
    assert code == 0 and out == "" and "core_dumps" in err
    code, out, _ = drift("--local", "--spec", str(spec), "--mode", "npd")
    assert (code, out) == (2, "gpurig: could not check: invalid spec (see stderr or syslog)\n")
    code, _, err = drift("drift.yaml", "--mode", "npd")
    assert code == 2 and "--mode goes with --local" in err


def test_a_read_that_does_not_finish_in_time_is_could_not_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpurig.facts.gpurig_packages import OsRelease
    from gpurig.node.read import drift_local
    from gpurig.spec.inventory import load_spec_file

    command = OsRelease.command
    monkeypatch.setattr(OsRelease, "command", lambda self: "sleep 3\n" + command(self))
    spec = tmp_path / "node.yaml"
    spec.write_text("core_dumps: enabled\n")
    began = time.monotonic()
    report = drift_local(load_spec_file(str(spec), "n1"), timeout=1)
    assert time.monotonic() - began < 2.5
    [unread] = report.findings
    assert unread.id == "state.unreadable" and "timeout" in unread.actual
    assert node_modes.verdict(report) == "unknown"
    assert node_modes.npd_line(report, mode("npd")) == "gpurig: could not check: state.unreadable"
