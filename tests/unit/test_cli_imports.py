"""Start-up budget, by import set rather than timing: the offline commands (`--version`,
`validate`, `compat`) must not load what only the connecting commands need (pyinfra's API,
paramiko, gevent, the sandbox, the deploys). Each case runs the console script's `main` in a
fresh interpreter and lists the modules it left loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.startup_bench import DRIFT_IMPORTS
from gpurig.cli.entry import CONNECTING, command_name

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories" / "examples" / "example.yaml"
HEAVY = [
    "pyinfra",
    "paramiko",
    "gevent",
    "gpurig.sandbox.manager",
    "gpurig.plans",
    "gpurig.facts",
    "gpurig.deploys",
]
# A torch arch list judged on a GPU's capability (either alone is a usage error: exit 2).
ON_H100 = ["--arch-list", "sm_80,sm_90", "--capability", "9.0"]
PROBE = """
import json, sys
from gevent_state import patched
sys.argv = ["gpurig", *json.loads(sys.argv[1])]
from gpurig.cli import entry
def done(status):  # the contract's own exit skips the teardown, and this line's report
    raise SystemExit(status)
entry.done = done
try:
    entry.main()
    code = 0
except SystemExit as exit:
    code = exit.code or 0
print(json.dumps({"modules": sorted(sys.modules), "patched": patched(), "code": code}))
"""
# Imported by PROBE from a temporary directory: whether gevent patched sockets, without
# importing gevent when nothing else did.
GEVENT_STATE = """
import sys
def patched():
    monkey = sys.modules.get("gevent.monkey")
    return bool(monkey and monkey.is_module_patched("socket"))
"""


def loaded_by(
    args: list[str], tmp_path: Path, exit_code: int | None = 0, home: Path | None = None
) -> tuple[set[str], bool]:
    """Modules loaded after `gpurig ARGS` ran to its exit, and whether gevent was patched in.
    The command must exit with `exit_code`: one that stopped early (a usage error, a crash
    turned into an exit) loads little, and would pass for a lean one. None: the verdict is this
    machine's (a node contract judging it), and the caller shows the work was done. `home`:
    the HOME it runs with (a user-scope converge writes there)."""
    (tmp_path / "gevent_state.py").write_text(GEVENT_STATE)
    env = {"PYTHONPATH": f"{ROOT}:{tmp_path}", "PATH": "/usr/bin:/bin",
           "GPURIG_RUNTIME_DIR": str(tmp_path / "run")}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        cwd=ROOT,
        env=env | ({"HOME": str(home)} if home else {}),
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(proc.stdout.splitlines()[-1])
    assert exit_code is None or result["code"] == exit_code, proc.stdout[-2000:]
    return set(result["modules"]), result["patched"]


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY))


@pytest.mark.parametrize(
    ("args", "exit_code"),
    [
        (["--version"], 0),
        (["--help"], 0),
        (["sandbox", "--help"], 0),
        (["validate", str(EXAMPLE)], 0),
        (["compat", "--driver", "570.124.04", "--cuda", "12.8", *ON_H100], 0),
        (["compat", "--driver", "575.57.08", "--cuda", "13.0", "--json"], 1),  # judged: fail
    ],
    ids=["version", "help", "sandbox-help", "validate", "compat", "compat-json-fail"],
)
def test_offline_commands_load_nothing_heavy(
    args: list[str], exit_code: int, tmp_path: Path
) -> None:
    modules, patched = loaded_by(args, tmp_path, exit_code)
    assert heavy(modules) == []
    assert not patched


def test_validate_loads_the_inventory_checker(tmp_path: Path) -> None:
    """The probe sees real work: validate imports what it validates with, and jsonschema only
    to explain a file that does not pass."""
    modules, _ = loaded_by(["validate", str(EXAMPLE)], tmp_path)
    assert {"gpurig.spec.inventory", "gpurig.spec.schema_check"} <= modules
    assert "jsonschema" not in modules
    bad = ROOT / "tests" / "unit" / "bad_inventories" / "size-without-unit.yaml"
    modules, _ = loaded_by(["validate", str(bad)], tmp_path, 2)
    assert "jsonschema" in modules


def test_apt_repository_reads_the_package_list_without_the_evaluator() -> None:
    """The sandbox's apt repository needs one list from toolkit.yaml, not pyinfra's API."""
    code = "import sys, gpurig.sandbox.aptrepo; print(' '.join(sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert heavy(set(proc.stdout.split())) == []


@pytest.mark.parametrize("command", sorted(CONNECTING))
def test_connecting_commands_patch_gevent_first(command: str, tmp_path: Path) -> None:
    """`--help` stops before the command runs, so the patch can only come from the entry."""
    modules, patched = loaded_by([command, "--help"], tmp_path)
    assert patched
    assert "gevent" in modules


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        ([], None),
        (["--version"], None),
        (["-h"], None),
        (["drift", "inv.yaml", "--limit", "validate"], "drift"),
        (["--help", "onboard"], "onboard"),
        (["validate", "drift.yaml"], "validate"),
    ],
)
def test_command_name_is_the_first_word_that_is_not_an_option(
    argv: list[str], name: str | None
) -> None:
    assert command_name(argv) == name


@pytest.mark.parametrize("args", [["--version"], ["validate", str(EXAMPLE)]])
def test_the_sandbox_group_loads_only_when_named(args: list[str], tmp_path: Path) -> None:
    modules, _ = loaded_by(args, tmp_path)
    assert "gpurig.cli.sandbox" not in modules
    named, _ = loaded_by(["sandbox", "--help"], tmp_path)
    assert "gpurig.cli.sandbox" in named


def test_the_judges_do_not_load_the_inventory_validator() -> None:
    """Sizes come from gpurig.spec.units: judging a host's state needs no jsonschema or ruamel."""
    code = (
        "import sys, gpurig.checks.all, gpurig.plans, gpurig.report.textfile, gpurig.node.modes;"
        " print(' '.join(sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    modules = set(proc.stdout.split())
    assert "gpurig.checks.node" in modules
    assert not {"gpurig.spec.inventory", "jsonschema", "ruamel"} & modules


def test_drift_starts_without_the_converge_or_the_other_commands() -> None:
    """What drift has imported when it starts reading hosts (the start-up benchmark's row)."""
    code = f"{DRIFT_IMPORTS}\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", f"import json, sys\n{code}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    modules = set(json.loads(proc.stdout.splitlines()[-1]))
    assert {"gpurig.remote.drift", "gevent", "pyinfra.api"} <= modules
    unneeded = [
        "gpurig.deploys",
        "gpurig.sandbox",
        "gpurig.cli.sandbox",
        "gpurig.onboard.onboard",
        "gpurig.onboard.pin",
    ]
    assert [m for m in modules if any(m == u or m.startswith(f"{u}.") for u in unneeded)] == []


def test_one_plugin_scan_answers_gevent_as_a_scan_would_and_is_undone() -> None:
    """While gevent patches, importlib.metadata answers its entry-point questions from one scan:
    the same entry points for each group, and the real function back afterwards."""
    from importlib import metadata

    from gpurig.remote.cooperative import one_plugin_scan

    scan = metadata.entry_points
    groups = ["console_scripts", "pyinfra.connectors", "gevent.plugins.monkey.will_patch_all"]
    expected = {group: sorted(ep.name for ep in scan(group=group)) for group in groups}
    with one_plugin_scan():
        assert metadata.entry_points is not scan
        found = {group: sorted(ep.name for ep in metadata.entry_points(group=group))
                 for group in groups}  # fmt: skip
    assert found == expected and "gpurig" in found["console_scripts"]
    assert metadata.entry_points is scan


# What a node contract must not load: an SSH stack, greenlets, a task runner, a schema engine
# (they cost a Prolog 10x NHC's time at every job start), nor click and the CLI
# module (its command line is read by gpurig.node.argv).
NODE_FORBIDDEN = ["pyinfra", "gevent", "paramiko", "invoke", "jsonschema", "click"]


@pytest.mark.parametrize("mode", ["prolog", "healthcheck", "npd", None, "up"])
def test_node_contracts_load_no_ssh_stack_and_no_schema_engine(
    mode: str | None, tmp_path: Path
) -> None:
    """Each contract, and `up --local` on a node with nothing to change (a user-scope spec
    with no engine, in a HOME of its own converged once before), reads and judges with the core
    alone."""
    spec, home = tmp_path / "node.yaml", tmp_path / "home"
    home.mkdir(mode=0o700)
    if mode == "up":
        spec.write_text("engine: none\nscope: user\n")
        args = ["up", "--local", "--spec", str(spec)]
        _, converging = loaded_by(args, tmp_path, 0, home)
        assert converging and "gpurig core_dumps" in (home / ".profile").read_text()
    else:
        spec.write_text("engine: none\ncore_dumps: disabled\nchecks: {disk_free_min: 1m}\n")
        args = ["drift", "--local", "--spec", str(spec), *(["--mode", mode] if mode else [])]
    modules, patched = loaded_by(args, tmp_path, None, home)  # the reader's modules: it judged
    assert {"gpurig.checks.judge", "gpurig.read.local", "gpurig.facts.round_trip"} <= modules
    assert not patched
    assert sorted(m for m in modules if m.split(".")[0] in NODE_FORBIDDEN) == []
    assert "gpurig.cli.main" not in modules
    # The spec unchanged since that run, its parse kept (gpurig.spec.runtime): no YAML parser.
    again, _ = loaded_by(args, tmp_path, None, home)
    assert "gpurig.checks.judge" in again and not {"ruamel", "yaml"} & {
        m.split(".")[0] for m in again
    }
    # Records are named tuples: a frozen dataclass costs a job start about 1 ms to create.
    assert "dataclasses" not in again
    if mode in ("npd", "prolog", "healthcheck") and os.geteuid() == 0:
        # Root's contract, its read forked ahead (gpurig.read.forked) and scontrol too
        # (gpurig.node.slurm), loads neither subprocess (threading, locale) nor pathlib or
        # urllib.parse (ipaddress): about 5 ms of each run.
        assert sorted({"subprocess", "pathlib", "urllib.parse"} & again) == []


def test_node_contract_modules_compile_no_pattern_at_import() -> None:
    """A pattern is compiled when first used (gpurig.spec.pattern): the modules a contract
    loads define about 80 and a node uses few (they cost 9 ms of every job start)."""
    code = (
        "import re, sys, gpurig.node.run, gpurig.node.up, gpurig.checks.judge, gpurig.read.local\n"
        "def compiled(v):\n"
        "    return isinstance(v, re.Pattern) or isinstance(v, (tuple, list)) and any(\n"
        "        compiled(x) for x in v)\n"
        "print(' '.join(f'{m}.{k}' for m, mod in list(sys.modules.items())\n"
        "               if m.startswith('gpurig') for k, v in vars(mod).items() if compiled(v)))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == []
