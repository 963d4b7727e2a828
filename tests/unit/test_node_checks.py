"""Node health beyond the GPU: the parsers on readings recorded from a real machine
(tests/fixtures/node/README.md), the checks' thresholds from checks.yaml, and the probe's
new sections run for real here: a real cgroup with real OOM kills behind a stand-in `docker`
CLI, and a real Python environment asked about a checkout that shadows its modules."""

from __future__ import annotations

import copy
import os
import re
import secrets
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from facts.probe import parse_probe, probe_kwargs, script_arguments
from gpurig import container_checks, node_checks, node_parse
from gpurig.checks import CHECK_IDS, check
from gpurig.inventory import schema
from gpurig.rules import rules
from gpurig.spec import normalise
from tests.unit.test_probe import run_script

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "node"
REF = "b" * 40
GB = 1000**3


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def meminfo_percpu(text: str) -> str:
    """The value the probe's sed keeps from /proc/meminfo's Percpu line."""
    [value] = re.findall(r"^Percpu:\s*(.*)$", text, re.M)
    return value


def oom_kill_line(text: str) -> str:
    """The value the probe's sed keeps from a memory.oom_control / memory.events file."""
    [value] = re.findall(r"^oom_kill (.*)$", text, re.M)
    return value


# -- parsers on recorded readings ---------------------------------------------------------


def test_proc_cgroups_recorded_on_a_v1_host() -> None:
    counts = node_parse.parse_proc_cgroups(fixture("proc_cgroups_v1-hybrid_linux-6.18.44.txt"))
    assert counts["memory"] == 594 and counts["cpu"] == 29 and len(counts) == 12
    counted = node_parse.cgroup_count(fixture("proc_cgroups_v1-hybrid_linux-6.18.44.txt"), None)
    assert counted == {"count": 594, "dying": None, "source": "/proc/cgroups memory"}


def test_cgroup_stat_recorded_from_a_cgroup2_root() -> None:
    stat = fixture("cgroup.stat_cgroup2-unified_linux-6.18.44.txt")
    counted = node_parse.cgroup_count(None, stat)
    assert counted == {"count": 56, "dying": 0, "source": "cgroup.stat"}
    # Both read (a pod's namespace sees its own subtree in cgroup.stat): the larger counts.
    both = node_parse.cgroup_count(fixture("proc_cgroups_v1-hybrid_linux-6.18.44.txt"), stat)
    assert both == {"count": 594, "dying": None, "source": "/proc/cgroups memory"}
    assert node_parse.cgroup_count("#subsys_name\thierarchy\tnum_cgroups\tenabled\n", stat) == (
        counted
    )


def test_percpu_from_recorded_meminfo_and_memory_stat_first() -> None:
    value = meminfo_percpu(fixture("proc_meminfo_linux-6.18.44.txt"))
    assert node_parse.percpu_bytes(None, value) == {
        "bytes": 4208 * 1024,
        "source": "/proc/meminfo Percpu",
    }
    assert node_parse.percpu_bytes("73728", value)["source"] == "memory.stat percpu"
    assert node_parse.percpu_bytes("", "") == {"bytes": None, "source": None}


def test_oom_kill_counter_recorded_after_two_kills() -> None:
    assert (
        node_parse.count(oom_kill_line(fixture("memory.oom_control_oom-kill-2_linux-6.18.44.txt")))
        == 2
    )
    assert (
        node_parse.count(oom_kill_line(fixture("memory.oom_control_root_linux-6.18.44.txt"))) == 0
    )


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (node_parse.count, "-1"),
        (node_parse.count, "3\n4"),
        (node_parse.count, "\u00b2"),  # a digit to str.isdigit, not to int()
        (node_parse.count, "1e9"),
        (lambda t: node_parse.cgroup_count(t, None), "memory\t4\tmany\t1"),
        (lambda t: node_parse.cgroup_count(t, None), "memory 4 5"),
        (lambda t: node_parse.cgroup_count(None, t), "nr_descendants 5"),
        (lambda t: node_parse.cgroup_count(None, t), "nr_descendants 5\nnr_dying_descendants -1"),
        (lambda t: node_parse.percpu_bytes(None, t), "4208 MB"),
        (node_parse.parse_imports_report, "Traceback (most recent call last):"),
        (node_parse.parse_imports_report, '{"modules": {"a; rm": null}, "site": [], "stdlib": []}'),
        (node_parse.parse_imports_report, '{"modules": {"a": {"origin": 3, "locations": []}}}'),
        (node_parse.parse_imports_report, '{"modules": {}, "site": "/usr", "stdlib": []}'),
    ],
)
def test_odd_output_is_refused_with_a_reason(parse: Any, text: str) -> None:
    with pytest.raises(ValueError):
        parse(text)


def test_odd_output_becomes_an_error_not_a_crash() -> None:
    probe = parse_probe(
        {
            "cgroup": {"oom_kill": "lots", "proc_cgroups": "garbage line", "percpu": "x"},
            "containers": [{"name": "train", "engine": "docker", "oom_kill": "-2"}],
            "imports": [{"checkout": "/srv/a", "python": "/v/bin/python", "ran": True,
                         "report": "not json"}],
        }
    )  # fmt: skip
    cgroup = probe["cgroup"]
    assert cgroup["oom_kill"] is None and "not a count" in cgroup["oom_kill_error"]
    assert cgroup["count"] is None and "/proc/cgroups" in cgroup["count_error"]
    assert cgroup["percpu"] is None and cgroup["percpu_error"]
    assert probe["containers"][0]["oom_kill"] is None
    assert probe["imports"][0]["error"].startswith("not JSON")


# -- the checks ---------------------------------------------------------------------------

SPEC = normalise(
    {
        "engine": "docker",
        "containers": {"train": {"image": "r/train@sha256:" + "a" * 64}},
        "repos": {
            "/srv/code": {
                "url": "https://x/y.git",
                "ref": REF,
                "python": {"lockfile": "uv.lock", "imports": ["docker", "torch"]},
            }
        },
    }
)
COUNTED = node_parse.cgroup_count(fixture("proc_cgroups_v1-hybrid_linux-6.18.44.txt"), None)
PROBE: dict[str, Any] = {
    "cgroup": {
        "oom_kill": 0,
        "count": COUNTED,
        "percpu": node_parse.percpu_bytes(
            None, meminfo_percpu(fixture("proc_meminfo_linux-6.18.44.txt"))
        ),
    },
    "containers": [{"name": "train", "engine": "docker", "oom_kill": 0, "inspect": {}}],
    "imports": [],
}


def judge(**changes: Any) -> list[Any]:
    probe = copy.deepcopy(PROBE)
    for dotted, value in changes.items():
        *keys, last = dotted.split("__")
        target: Any = probe
        for key in keys:
            target = target[int(key)] if key.isdigit() else target[key]
        target[last] = value
    return [*node_checks.check(SPEC, probe), *container_checks.check(SPEC, probe)]


def test_this_machines_readings_are_healthy() -> None:
    assert judge() == []


def test_every_node_check_is_a_check_id_with_a_known_remediation() -> None:
    for check_id in (*node_checks.IDS, *container_checks.IDS):
        row = rules()["checks"][check_id]
        assert check_id in CHECK_IDS
        assert row["severity"] in ("warn", "error") and row["source"]
        assert row["remediation"] in rules()["remediations"]


def test_container_oom_kill_names_the_container_and_the_count() -> None:
    kills = node_parse.count(
        oom_kill_line(fixture("memory.oom_control_oom-kill-2_linux-6.18.44.txt"))
    )
    [finding] = judge(containers__0__oom_kill=kills)
    assert (finding.id, finding.severity, finding.remediation) == (
        "container.oom_kill", "warn", "restart-job",
    )  # fmt: skip
    assert "train" in finding.message and finding.actual == "oom_kill 2 in its cgroup"


def test_a_stopped_containers_oom_killed_state_is_a_finding_too() -> None:
    [finding] = judge(containers__0__inspect={"State": {"OOMKilled": True, "Running": False}})
    assert finding.id == "container.oom_kill" and "State.OOMKilled" in finding.actual


def test_host_oom_kill_reads_the_probes_own_cgroup() -> None:
    [finding] = judge(cgroup__oom_kill=5)
    assert (finding.id, finding.actual) == ("host.oom_kill", "oom_kill 5")


@pytest.mark.parametrize(
    ("count", "severity"), [(50_000, None), (50_001, "warn"), (100_000, "warn"), (100_001, "error")]
)
def test_cgroup_leak_thresholds(count: int, severity: str | None) -> None:
    findings = judge(cgroup__count={**COUNTED, "count": count})
    assert [f.severity for f in findings] == ([severity] if severity else [])
    if severity:
        assert findings[0].id == "host.cgroup_leak" and findings[0].remediation == "reboot"
        assert f"{count} cgroups (/proc/cgroups memory)" == findings[0].actual


def test_cgroup_leak_says_how_many_are_dying() -> None:
    stat = "nr_descendants 30000\nnr_dying_descendants 70000\n"
    [finding] = judge(cgroup__count=node_parse.cgroup_count(None, stat))
    assert finding.severity == "error"
    assert finding.actual == "100001 cgroups, 70000 of them dying (cgroup.stat)"


@pytest.mark.parametrize(
    ("size", "severity"), [(20 * GB, None), (20 * GB + 1, "warn"), (50 * GB + 1, "error")]
)
def test_percpu_thresholds(size: int, severity: str | None) -> None:
    findings = judge(cgroup__percpu={"bytes": size, "source": "memory.stat percpu"})
    assert [(f.id, f.severity) for f in findings] == (
        [("host.percpu_memory", severity)] if severity else []
    )


def test_imports_unreadable_report_names_the_python() -> None:
    entry = {"checkout": "/srv/code", "python": "/srv/code/.venv/bin/python", "report": None,
             "error": "the environment's python printed nothing"}  # fmt: skip
    [finding] = judge(imports=[entry])
    assert finding.id == "env.imports" and "printed nothing" in finding.actual
    assert "/srv/code/.venv/bin/python" in finding.actual


def test_no_environment_no_imports_finding() -> None:
    entry = {"checkout": "/srv/code", "python": "/srv/code/.venv/bin/python", "report": None,
             "error": None}  # fmt: skip
    assert judge(imports=[entry]) == []  # repo.env reports the missing environment


# -- spec and probe arguments -------------------------------------------------------------


def test_schema_and_probe_accept_the_same_module_names() -> None:
    python = schema()["$defs"]["repo"]["properties"]["python"]["properties"]
    assert python["imports"]["items"]["pattern"] == f"^{node_parse.MODULE_NAME.pattern}$(?!\\n)"


def test_probe_kwargs_carry_declared_imports_only() -> None:
    assert probe_kwargs(SPEC)["imports"] == [["/srv/code", "/srv/code/.venv", ["docker", "torch"]]]
    bare = normalise({"repos": {"/srv/x": {"url": "https://x/y.git", "ref": REF}}})
    assert "imports" not in probe_kwargs(bare)


@pytest.mark.parametrize(
    "imports",
    [
        [["/srv/a", "/srv/a/.venv", ["os; rm -rf /"]]],
        [["/srv/a", "/srv/a/.venv", ["os.path"]]],
        [["/srv/a", "/srv/a/.venv", ["$(id)"]]],
        [["/srv/a", "/srv/a/.venv", []]],
        [["/srv/a\tb", "/srv/a/.venv", ["os"]]],
        [["relative", "/srv/a/.venv", ["os"]]],
    ],
)
def test_probe_refuses_names_and_paths_before_any_command(imports: list[Any]) -> None:
    with pytest.raises(ValueError, match="imports"):
        script_arguments(imports=imports)


# -- the probe's new sections, run for real on this machine -------------------------------


def test_probe_reads_this_machines_cgroup_counts_and_percpu() -> None:
    cgroup = parse_probe(run_script(script_arguments()))["cgroup"]
    v2 = Path("/sys/fs/cgroup/cgroup.controllers").exists()
    expected = node_parse.cgroup_count(
        Path("/proc/cgroups").read_text(),
        Path("/sys/fs/cgroup/cgroup.stat").read_text() if v2 else None,
    )
    assert cgroup["count_error"] is None and cgroup["count"]["source"] == expected["source"]
    assert abs(cgroup["count"]["count"] - expected["count"]) <= 50  # others make cgroups too
    percpu = meminfo_percpu(Path("/proc/meminfo").read_text())
    assert cgroup["percpu"]["bytes"] > 0 and cgroup["percpu_error"] is None
    if cgroup["percpu"]["source"] == "/proc/meminfo Percpu":
        assert cgroup["percpu"] == node_parse.percpu_bytes(None, percpu)


def _memory_cgroup() -> Path:
    """A fresh memory cgroup (v2 when the host has one, else v1), or a skip saying why not."""
    name = f"gpurig-test-{secrets.token_hex(4)}"
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():
        root = Path("/sys/fs/cgroup")
        if "memory" not in (root / "cgroup.subtree_control").read_text().split():
            pytest.skip("the cgroup v2 root does not delegate the memory controller")
        limits = {"memory.max": "16M", "memory.swap.max": "0"}
    else:
        root = Path("/sys/fs/cgroup/memory")
        limits = {"memory.limit_in_bytes": "16M", "memory.memsw.limit_in_bytes": "16M"}
    if os.getuid() != 0 or not os.access(root, os.W_OK):
        pytest.skip(f"making a memory cgroup needs root and a writable {root}")
    path = root / name
    path.mkdir()
    for key, value in limits.items():
        if (path / key).exists():
            (path / key).write_text(value)
    return path


@pytest.fixture
def oom_killed_container(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A process in a real memory cgroup where the kernel OOM-killed two processes, and a
    PATH whose `docker` answers inspect for it (the only part that stands in)."""
    cgroup = _memory_cgroup()
    enter = f"echo $$ > {cgroup}/cgroup.procs && exec "
    sleeper = None
    try:
        for _ in range(2):
            hog = subprocess.run(
                ["sh", "-c", enter + f"{sys.executable} -c 'b = bytearray(200 * 2**20)'"],
                capture_output=True,
            )
            assert hog.returncode == -9 or hog.returncode == 137, hog
        sleeper = subprocess.Popen(["sh", "-c", enter + "sleep 60"])
        while str(sleeper.pid) not in (cgroup / "cgroup.procs").read_text().split():
            time.sleep(0.01)
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        docker = bin_dir / "docker"
        docker.write_text(
            f"#!/bin/sh\ncase $1 in inspect) echo 'true {sleeper.pid}' ;; *) exit 1 ;; esac\n"
        )
        docker.chmod(0o755)
        yield "train", f"{bin_dir}:{os.environ['PATH']}"
    finally:
        if sleeper:
            sleeper.kill()
            sleeper.wait()
        for _ in range(100):
            try:
                cgroup.rmdir()
                break
            except OSError:
                time.sleep(0.05)


def test_probe_reads_a_containers_oom_kills_from_its_real_cgroup(
    oom_killed_container: tuple[str, str],
) -> None:
    name, path = oom_killed_container
    doc = run_script(script_arguments(engine="docker", containers=[name]), path=path)
    probe = parse_probe(doc)
    assert probe["containers"][0]["oom_kill"] == 2
    findings = [f for f in check(SPEC, probe) if f.id == "container.oom_kill"]
    assert [f.actual for f in findings] == ["oom_kill 2 in its cgroup"]


def test_probe_finds_shadowed_and_missing_imports_in_a_real_environment(private_dir: Path) -> None:
    """This test's own environment, asked from a checkout with a `yaml/` package (shadows
    PyYAML), a `docker/` directory without __init__.py (the field notes' case: no docker SDK
    installed) and a `jsonschema/` directory (a namespace portion the installed package wins
    over)."""
    checkout = private_dir / "checkout"
    (checkout / "yaml").mkdir(parents=True)
    (checkout / "yaml" / "__init__.py").write_text("raise SystemExit('never imported')\n")
    (checkout / "docker").mkdir()
    (checkout / "jsonschema").mkdir()
    # This test's own environment, seen through a venv in private_dir: wherever the checkout
    # lies (a clone under /tmp is anyone's directory), the probe then runs its python.
    venv = str(private_dir / "venv")
    site_dir = sysconfig.get_path("purelib")
    (private_dir / "venv" / "bin").mkdir(parents=True)
    (private_dir / "venv" / "bin" / "python").symlink_to(os.path.realpath(sys.executable))
    (private_dir / "venv" / "pyvenv.cfg").write_text(
        f"home = {os.path.dirname(os.path.realpath(sys.executable))}\n"
        "include-system-site-packages = false\n"
    )
    lib = private_dir / "venv" / os.path.relpath(site_dir, sys.prefix)
    lib.parent.mkdir(parents=True)
    lib.symlink_to(site_dir)
    names = ["yaml", "docker", "jsonschema", "json", "sys", "no_such_module_here"]
    spec = normalise(
        {"repos": {str(checkout): {"url": "https://x/y.git", "ref": REF,
                                   "python": {"lockfile": "uv.lock", "venv": venv,
                                              "imports": names}}}}
    )  # fmt: skip
    doc = run_script(script_arguments(**probe_kwargs(spec)))
    probe = parse_probe(doc)
    [entry] = probe["imports"]
    assert entry["error"] is None and entry["python"] == f"{venv}/bin/python"
    assert entry["report"]["python"] == sys.version.split()[0]
    [finding] = node_checks.check(spec, probe)
    assert finding.id == "env.imports" and finding.severity == "error"
    real = os.path.realpath(checkout)
    assert finding.actual == (
        f"yaml: from {real}/yaml; docker: a directory without __init__.py: {real}/docker; "
        "no_such_module_here: not found"
    )
    assert finding.message.startswith("yaml, docker, no_such_module_here do not import")
