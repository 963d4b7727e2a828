"""What a node contract does about each finding (gpurig/checks/node_actions.py,
gpurig/node/policy.py): the defaults of
gpurig/data/node_modes.yaml, a spec's `node_contracts` over them, the schema's refusals, the
drain budget over the cluster's nodes, and the contracts run on this machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gpurig.checks.node_actions import FAMILY, default_action, governed_ids, policy
from gpurig.cli.main import main
from gpurig.node import modes as node_modes
from gpurig.node.modes import NodeState
from gpurig.node.policy import Held, budget_nodes, governed, withheld
from gpurig.plans import CHANGE_IDS
from gpurig.report import explain
from gpurig.report.textfile import contract_families, render
from gpurig.spec.finding import Difference, Finding, HostReport
from gpurig.spec.inventory import SCHEMA_PATH, InventoryError, load_spec_file

# The node's hardware and health, which an operator drains for (the and NHC's).
FAULTS = ("gpu.", "fabric.", "pcie.", "disk.", "host.", "compat.", "nccl.")
# Errors about what the converge does not install: the node cannot run the declared driver.
DRIVER_FAULTS = {"driver.version", "driver.missing"}


def error(fid: str) -> Finding:
    return Finding(fid, "error", "m", "e", "a", "fix")


def test_every_governed_id_has_a_default_and_faults_drain_while_drift_reports() -> None:
    defaults = policy({}).defaults
    for fid in governed_ids():
        family = fid.split(".")[0] + FAMILY
        assert fid in defaults or family in defaults, f"{fid}: no default action"
        action = default_action(fid)
        if fid.startswith(FAULTS) or fid in DRIVER_FAULTS:
            assert action == "drain", fid
        elif fid in CHANGE_IDS:
            assert action == "report", fid  # configuration drift the converge fixes


def test_the_spec_s_entries_win_id_over_family_spec_over_defaults() -> None:
    spec = {"node_contracts": {"actions": {"gpu.*": "report", "gpu.xid": "off",
                                           "core_dumps.file": "drain"}}}  # fmt: skip
    pol = policy(spec)
    assert pol.action("gpu.ecc") == "report"  # the spec's family over the defaults' family
    assert pol.action("gpu.xid") == "off"
    assert pol.action("core_dumps.file") == "drain"
    assert pol.action("core_dumps.profile") == "report"  # the default still
    assert pol.action("driver.version") == "drain"  # the defaults' id over their family
    assert pol.action("driver.hold") == "report"
    # A grouped finding takes its ids' strongest action.
    grouped = Finding("container.differs", "error", "m", differences=(
        Difference("shm", "1g", "2g", "container.shm_size"),
        Difference("env", "a", "b", "container.env")))  # fmt: skip
    assert policy({}).of(grouped.ids) == "report"
    drains = policy({"node_contracts": {"actions": {"container.env": "drain"}}})
    assert drains.of(grouped.ids) == "drain"


def test_off_drops_findings_but_never_could_not_check() -> None:
    report = HostReport("n1", True, [error("disk.free"), error("gpu.ecc"),
                                     error("state.unreadable")])  # fmt: skip
    pol = policy({"node_contracts": {"actions": {"disk.*": "off", "state.unreadable": "off"}}})
    kept = governed(report, pol, node_modes.UNCHECKED)
    assert [f.id for f in kept.findings] == ["gpu.ecc", "state.unreadable"]
    assert node_modes.acted_on(kept, pol, "drain") == ["gpu.ecc"]
    mixed = HostReport("n1", True, [error("core_dumps.file"), error("disk.free")])
    assert node_modes.acted_on(mixed, policy({}), "drain") == ["disk.free"]
    assert node_modes.acted_on(mixed, policy({}), "report") == ["core_dumps.file"]


def test_budget_is_a_count_or_a_share_rounded_up_at_least_one() -> None:
    assert [budget_nodes("10%", n) for n in (1, 2, 10, 16, 100)] == [1, 1, 1, 2, 10]
    assert budget_nodes("1%", 5) == 1 and budget_nodes("100%", 7) == 7
    assert budget_nodes(2, 1000) == 2
    assert policy({}).max_drained == "10%" and policy({}).same_id == 3


def cluster(held: dict[str, frozenset[str]], size: int = 16) -> list[Held]:
    """`size` nodes n0.. of partition debug, those in `held` drained by gpurig for its ids,
    and two nodes of another partition, both held."""
    nodes = [Held(f"n{i}", frozenset({"debug"}), held.get(f"n{i}")) for i in range(size)]
    other = [Held(f"o{i}", frozenset({"other"}), frozenset({"gpu.ecc"})) for i in range(9)]
    return nodes + other


def test_budget_withholds_past_the_partition_s_share() -> None:
    pol = policy({})  # 10% of 16: 2 nodes
    one = cluster({"n1": frozenset({"gpu.ecc"})})
    assert withheld(one, "n0", ["disk.free"], pol) is None  # the other partition's 9 not counted
    two = cluster({"n1": frozenset({"gpu.ecc"}), "n2": frozenset({"disk.free"})})
    assert withheld(two, "n0", ["gpu.xid"], pol) == (
        "drain withheld: 2 of 16 nodes of partition debug already drained by gpurig (budget 2)"
    )
    # A node does not count against itself.
    assert withheld(two, "n2", ["disk.free"], pol) is None
    counted = policy({"node_contracts": {"drain_budget": {"max_drained": 3}}})
    assert withheld(two, "n0", ["gpu.xid"], counted) is None


def test_same_id_withholds_a_spec_error() -> None:
    pol = policy({"node_contracts": {"drain_budget": {"max_drained": "100%"}}})
    ids = frozenset({"driver.version"})
    three = cluster({f"n{i}": ids for i in (1, 2, 3)})
    assert withheld(three, "n0", ["driver.version"], pol) == (
        "drain withheld: 3 of 16 nodes already drained by gpurig for driver.version: a spec error?"
    )
    assert withheld(three, "n0", ["gpu.ecc"], pol) is None
    assert withheld(cluster({"n1": ids, "n2": ids}), "n0", ["driver.version"], pol) is None


def test_held_is_drained_or_down_with_gpurig_s_reason() -> None:
    def node(flags: str, reason: str | None) -> Held:
        return NodeState("n", frozenset(flags.split("+")), reason, frozenset({"p"})).held

    two = node("IDLE+DRAIN", "gpurig: disk.free gpu.ecc (+2 more)")
    assert two.ids == {"disk.free", "gpu.ecc"}
    assert node("DOWN", "gpurig: gpu.xid").ids == {"gpu.xid"}
    assert node("IDLE+DRAIN", "fan check").ids is None
    assert node("IDLE", "gpurig: gpu.xid").ids is None  # resumed: a stale reason


def test_the_schema_names_every_governed_id_and_family() -> None:
    schema = json.loads(Path(SCHEMA_PATH).read_text())
    enum = schema["$defs"]["findingSelector"]["enum"]
    ids = governed_ids()
    assert sorted(enum) == sorted({*ids, *(i.split(".")[0] + FAMILY for i in ids)})


def spec_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "node.yaml"
    path.write_text(text)
    return path


def test_an_unknown_id_is_refused_with_the_nearest(tmp_path: Path) -> None:
    path = spec_file(tmp_path, "node_contracts:\n  actions:\n    gpu.xdi: report\n"
                     "    fabric.*: sometimes\n  drain_budget: {max_drained: 150%}\n")  # fmt: skip
    with pytest.raises(InventoryError) as refused:
        load_spec_file(path, "n1")
    lines = str(refused.value).splitlines()
    assert lines[0] == (
        f'{path}:3: node_contracts.actions["gpu.xdi"]: expected a finding id (`gpurig explain '
        "--list`) or a family of ids such as gpu.*; got 'gpu.xdi'; nearest: gpu.xid"
    )
    assert lines[1] == (
        f'{path}:4: node_contracts.actions["fabric.*"]: expected one of drain, report, off; '
        "got 'sometimes'"
    )
    assert lines[2].startswith(f"{path}:5: node_contracts.drain_budget.max_drained: expected")
    good = spec_file(tmp_path, "node_contracts:\n  actions: {gpu.*: report, disk.free: off}\n"
                     "  drain_budget: {max_drained: 10%, same_id: 2}\n")  # fmt: skip
    assert policy(load_spec_file(good, "n1").spec).action("gpu.ecc") == "report"


def test_explain_and_the_catalogue_show_the_default_action() -> None:
    assert explain.entry("gpu.ecc").node_action == "drain"
    assert explain.entry("core_dumps.file").node_action == "report"
    assert explain.entry("fleet.mixed_driver").node_action == ""
    assert explain.entry("state.unreadable").node_action == ""
    text = explain.as_text(explain.entry("packages.missing"))
    assert "Node contracts: report by default" in text
    assert "Node contracts" not in explain.as_text(explain.entry("fleet.mixed_driver"))


def test_the_textfile_says_whether_a_drain_was_withheld() -> None:
    report = [HostReport("n1", True)]
    for held, line in (
        (True, "gpurig_drain_withheld 1\n"),
        (False, "gpurig_drain_withheld 0\n"),
    ):
        assert line in render(report, 0.0, 0.0, False, [], contract_families(held, {}))
    npd = render(report, 0.0, 0.0, False, [], contract_families(None, {}))
    assert "gpurig_drain_withheld" not in npd


def contract(tmp_path: Path, mode: str, actions: dict[str, str]) -> tuple[int, str, str]:
    """A contract run here (no scontrol: a drain cannot act) with a textfile, on a spec this
    machine is wrong for whatever its disk (disk.free, which drains by default); every other
    family off, so what this machine has besides does not count."""
    others = {i.split(".")[0] + FAMILY for i in governed_ids()} - {"disk.*"}
    spec = {"checks": {"disk_free_min": "1000t"},
            "node_contracts": {"actions": {**dict.fromkeys(others, "off"), **actions}}}  # fmt: skip
    path = spec_file(tmp_path, yaml.safe_dump(spec))
    (tmp_path / "tf").mkdir(exist_ok=True)
    result = CliRunner().invoke(main, ["drift", "--local", "--spec", str(path), "--mode", mode,
                                       "--textfile", str(tmp_path / "tf")])  # fmt: skip
    return result.exit_code, result.stdout, result.stderr


def test_contracts_here_report_drain_or_drop_as_the_policy_says(tmp_path: Path) -> None:
    code, out, err = contract(tmp_path, "npd", {})
    assert (code, out) == (1, "gpurig: disk.free\n"), err
    code, out, err = contract(tmp_path, "npd", {"disk.*": "off"})
    assert (code, out) == (0, "gpurig: ok\n"), err
    series = (tmp_path / "tf" / "gpurig_drift.prom").read_text()
    assert 'id="disk.free"' not in series and "gpurig_drain_withheld" not in series
    # The Prolog: a drain it cannot act on refuses the job (SLURM drains on exit 1)...
    code, out, err = contract(tmp_path, "prolog", {})
    assert code == 1 and err.startswith("gpurig prolog: refused the job: cannot act: "), err
    # ...a finding the policy only reports lets the job run, said on stderr.
    code, out, err = contract(tmp_path, "prolog", {"disk.free": "report"})
    assert code == 0, err
    assert err.startswith("gpurig prolog: the job runs: not drained for disk.free "
                          "(policy: report)\n"), err  # fmt: skip
    series = (tmp_path / "tf" / "gpurig_drift.prom").read_text()
    assert 'gpurig_drift_findings{id="disk.free",severity="error"} 1' in series
    assert "gpurig_drain_withheld 0" in series
