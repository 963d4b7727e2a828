"""Node health beyond the GPU: the parsers on readings recorded from a real machine
(tests/fixtures/node/README.md), the checks' thresholds from checks.yaml, and the node facts
run for real here: a real cgroup with real OOM kills behind a stand-in `docker` CLI, and a
real Python environment asked about a checkout that shadows its modules."""

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

from gpurig.checks import container as container_checks
from gpurig.checks import node as node_checks
from gpurig.checks.all import CHECK_IDS
from gpurig.checks.rules import rules
from gpurig.facts.gpurig_container import ContainerInspect
from gpurig.facts.gpurig_node import CgroupLeaks, CgroupMemory, HostMemory, Login, LoginShell
from gpurig.facts.gpurig_repo import EnvImports
from gpurig.facts.round_trip import required_reads
from gpurig.read import node_parse
from gpurig.spec.inventory import schema
from gpurig.spec.model import normalise
from tests.unit.fact_values import reader, run_here

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "node"
REF = "b" * 40
GB = 1000**3


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def meminfo_percpu(text: str) -> str:
    """The value HostMemory keeps from /proc/meminfo's Percpu line."""
    [value] = re.findall(r"^Percpu:\s*(.*)$", text, re.M)
    return value


def oom_kill_line(text: str) -> str:
    """The value the facts' sed keeps from a memory.oom_control / memory.events file."""
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


@pytest.mark.parametrize(
    ("fact", "parts", "reason"),
    [
        (CgroupMemory, {"oom_kill": "lots"}, "not a count"),
        (CgroupMemory, {"limit": "12 GB"}, "not a number of bytes"),
        (CgroupLeaks, {"proc_cgroups": "garbage line"}, "/proc/cgroups"),
        (HostMemory, {"meminfo": "Percpu:  x"}, "Percpu"),
        (HostMemory, {"meminfo": "MemTotal:  lots"}, "MemTotal"),
    ],
)
def test_odd_output_is_refused_by_the_fact(fact: Any, parts: dict, reason: str) -> None:
    """A fact refuses what the host printed (HostState keeps it as Unreadable: the checks
    reading it say state.unreadable), never a guess."""
    with pytest.raises(ValueError, match=reason):
        fact.parse(parts)


def test_an_environment_printing_something_else_is_an_error_of_its_report() -> None:
    entry = EnvImports.parse({"python": "/v/bin/python", "ran": "yes", "report": "not json"})
    assert entry["report"] is None and entry["error"].startswith("not JSON")


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
NOT_RUN = {"python": "/srv/code/.venv/bin/python", "ran": False, "run_as": None, "refused": None,
           "report": None, "error": None}  # fmt: skip
VALUES: dict[type, Any] = {
    Login: {"uid": 0, "user": "root", "sudo": None},
    LoginShell: {"ulimit_c": "0"},
    CgroupMemory: {"limit": None, "oom_kill": 0},
    CgroupLeaks: {
        "count": COUNTED,
        "percpu": node_parse.percpu_bytes(
            None, meminfo_percpu(fixture("proc_meminfo_linux-6.18.44.txt"))
        ),
    },
    ContainerInspect: {"train": {"inspect": {}, "oom_kill": 0}},
    EnvImports: {"/srv/code": NOT_RUN},
}


def judge(*changes: tuple[type, str, Any]) -> list[Any]:
    """node_checks on VALUES with (fact, "key.path", value) changes (ints index lists)."""
    values = copy.deepcopy(VALUES)
    for fact, dotted, value in changes:
        *keys, last = dotted.split(".")
        target: Any = values[fact]
        for key in keys:
            target = target[int(key)] if key.isdigit() else target[key]
        target[last] = value
    return judged(SPEC, reader(values))


def judged(spec: dict[str, Any], read: Any) -> list[Any]:
    """The node rules and the containers' running state, as gpurig.checks.all runs them."""
    rules = (*node_checks.RULES, *node_checks.IMPORTS, *container_checks.CONTAINER_RULES)
    return [finding for rule in rules for finding in rule(spec, read)]


def test_this_machines_readings_are_healthy() -> None:
    assert judge() == []


def test_every_node_check_is_a_check_id_with_a_known_remediation() -> None:
    for check_id in (*node_checks.IDS, *container_checks.IDS):
        row = rules()["checks"][check_id]
        assert check_id in CHECK_IDS
        assert row["severity"] in ("warn", "error") and row["source"]
        assert row["remediation"] in rules()["remediations"]


@pytest.mark.parametrize(
    ("spec", "ours"),
    [(SPEC, "/etc/profile.d/gpurig-core.sh"), (normalise({"scope": "user"}), "gpurig's block")],
    ids=["system", "user"],
)
def test_a_login_shell_raising_the_limit_is_named_by_file_and_line(spec: Any, ours: str):
    """The login's trace named the `ulimit` that left the limit: the finding says which file
    and line undid gpurig's, and the fix is to remove that line, not a list of places."""
    where = {"file": "~/.profile", "line": 12, "command": "ulimit -c unlimited"}
    shell = {"ulimit_c": "unlimited", "where": where}
    [finding] = judged(spec, reader({**VALUES, LoginShell: shell}))
    assert finding.id == "core_dumps.login_shell" and finding.severity == "error"
    assert finding.message == (
        f"~/.profile:12 `ulimit -c unlimited` raises the limit after {ours}: a login shell may "
        "still write core files, which can fill the disk"
    )
    assert finding.fix.startswith("remove `ulimit -c unlimited` at ~/.profile:12 (or declare ")
    assert finding.actual == "ulimit -c unlimited"
    # Where the trace named nothing (no bash, a limit PAM set), where to look instead.
    [unnamed] = judged(spec, reader({**VALUES, LoginShell: {"ulimit_c": "unlimited"}}))
    assert unnamed.message == "a login shell may still write core files, which can fill the disk"
    assert unnamed.fix.startswith(f"find what raises the limit after {ours} (~/.bashrc")


def test_container_oom_kill_names_the_container_and_the_count() -> None:
    kills = node_parse.count(
        oom_kill_line(fixture("memory.oom_control_oom-kill-2_linux-6.18.44.txt"))
    )
    [finding] = judge((ContainerInspect, "train.oom_kill", kills))
    assert (finding.id, finding.severity, finding.remediation) == (
        "container.oom_kill", "warn", "restart-job",
    )  # fmt: skip
    assert "train" in finding.message and finding.actual == "oom_kill 2 in its cgroup"


def test_a_stopped_containers_oom_killed_state_is_a_finding_too() -> None:
    stopped = {"State": {"OOMKilled": True, "Running": False}}
    [finding] = judge((ContainerInspect, "train.inspect", stopped))
    assert finding.id == "container.oom_kill" and "State.OOMKilled" in finding.actual


def test_host_oom_kill_reads_the_logins_root_cgroup() -> None:
    [finding] = judge((CgroupMemory, "oom_kill", 5))
    assert (finding.id, finding.actual) == ("host.oom_kill", "oom_kill 5")


@pytest.mark.parametrize(
    ("count", "severity"), [(50_000, None), (50_001, "warn"), (100_000, "warn"), (100_001, "error")]
)
def test_cgroup_leak_thresholds(count: int, severity: str | None) -> None:
    findings = judge((CgroupLeaks, "count", {**COUNTED, "count": count}))
    assert [f.severity for f in findings] == ([severity] if severity else [])
    if severity:
        assert findings[0].id == "host.cgroup_leak" and findings[0].remediation == "reboot"
        assert f"{count} cgroups (/proc/cgroups memory)" == findings[0].actual


def test_cgroup_leak_says_how_many_are_dying() -> None:
    stat = "nr_descendants 30000\nnr_dying_descendants 70000\n"
    [finding] = judge((CgroupLeaks, "count", node_parse.cgroup_count(None, stat)))
    assert finding.severity == "error"
    assert finding.actual == "100001 cgroups, 70000 of them dying (cgroup.stat)"


@pytest.mark.parametrize(
    ("size", "severity"), [(20 * GB, None), (20 * GB + 1, "warn"), (50 * GB + 1, "error")]
)
def test_percpu_thresholds(size: int, severity: str | None) -> None:
    findings = judge((CgroupLeaks, "percpu", {"bytes": size, "source": "memory.stat percpu"}))
    assert [(f.id, f.severity) for f in findings] == (
        [("host.percpu_memory", severity)] if severity else []
    )


def test_imports_unreadable_report_names_the_python() -> None:
    error = "the environment's python printed nothing"
    [finding] = judge((EnvImports, "/srv/code", {**NOT_RUN, "ran": True, "error": error}))
    assert finding.id == "env.imports" and "printed nothing" in finding.actual
    assert "/srv/code/.venv/bin/python" in finding.actual


def test_no_environment_no_imports_finding() -> None:
    assert judge() == []  # repo.env reports the missing environment


# -- spec and fact arguments --------------------------------------------------------------


def test_schema_and_import_check_accept_the_same_module_names() -> None:
    python = schema()["$defs"]["repo"]["properties"]["python"]["properties"]
    assert python["imports"]["items"]["pattern"] == f"^{node_parse.MODULE_NAME.pattern}$(?!\\n)"


def test_declared_imports_alone_are_read() -> None:
    reads = required_reads(lambda read: judged(SPEC, read))
    wanted = {"checkout": "/srv/code", "venv": "/srv/code/.venv", "modules": ["docker", "torch"]}
    assert [kwargs for cls, kwargs in reads if cls is EnvImports] == [wanted]
    bare = normalise({"repos": {"/srv/x": {"url": "https://x/y.git", "ref": REF}}})
    assert EnvImports not in {cls for cls, _ in required_reads(lambda r: judged(bare, r))}


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
def test_import_check_refuses_names_and_paths_before_any_command(imports: list[Any]) -> None:
    [[checkout, venv, modules]] = imports
    with pytest.raises(ValueError, match="imports"):
        EnvImports().command(checkout=checkout, venv=venv, modules=modules)


# -- the node facts, run for real on this machine -----------------------------------------


def test_cgroup_leaks_reads_this_machines_cgroup_counts_and_percpu() -> None:
    cgroup = run_here(CgroupLeaks)
    v2 = Path("/sys/fs/cgroup/cgroup.controllers").exists()
    expected = node_parse.cgroup_count(
        Path("/proc/cgroups").read_text(),
        Path("/sys/fs/cgroup/cgroup.stat").read_text() if v2 else None,
    )
    assert cgroup["count"]["source"] == expected["source"]
    assert abs(cgroup["count"]["count"] - expected["count"]) <= 50  # others make cgroups too
    # The root memory.stat's count on cgroup v2, else /proc/meminfo's (HostMemory).
    percpu = cgroup["percpu"]
    if percpu["bytes"] is None:
        percpu = run_here(HostMemory)["percpu"]
        meminfo = meminfo_percpu(Path("/proc/meminfo").read_text())
        assert percpu == node_parse.percpu_bytes(None, meminfo)
    assert percpu["bytes"] > 0


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


ENGINE_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "engine"


@pytest.fixture(params=["docker", "podman"])
def oom_killed_container(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A process in a real memory cgroup where the kernel OOM-killed two processes, and a
    PATH whose engine CLI answers `container inspect` with its recorded inspect of a running
    container, the pid set to that process's (the only part that stands in)."""
    engine: str = request.param
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
        recorded = (ENGINE_FIXTURES / f"{engine}-inspect-train.json").read_text()
        inspect = tmp_path / "inspect.json"
        inspect.write_text(re.sub(r'"Pid": \d+,', f'"Pid": {sleeper.pid},', recorded))
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        cli = bin_dir / engine
        cli.write_text(
            f'#!/bin/sh\n[ "$1 $2" = "container inspect" ] && exec cat {inspect}\nexit 1\n'
        )
        cli.chmod(0o755)
        yield engine, f"{bin_dir}:{os.environ['PATH']}"
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


def test_container_inspect_reads_its_oom_kills_from_its_real_cgroup(
    oom_killed_container: tuple[str, str],
) -> None:
    """The container's pid comes from its one reader, ContainerInspect, which counts the OOM
    kills in that pid's memory cgroup in the same command."""
    engine, path = oom_killed_container
    found = run_here(ContainerInspect, env_path=path, engine=engine, container="train")
    assert found["inspect"]["State"]["Running"] is True and found["oom_kill"] == 2
    spec = normalise({**SPEC, "engine": engine})
    values = {**VALUES, ContainerInspect: {"train": found}}
    findings = [f for f in judged(spec, reader(values)) if f.id == "container.oom_kill"]
    assert [f.actual for f in findings] == ["oom_kill 2 in its cgroup"]


def test_a_pid_line_that_is_not_the_documents_counts_nothing() -> None:
    """The count is kept only for the pid the parsed inspect holds (a `"Pid":` line elsewhere in
    the engine's JSON must not pick another process's cgroup)."""
    recorded = (ENGINE_FIXTURES / "docker-inspect-train.json").read_text()

    def parsed(oom: str) -> dict:
        return ContainerInspect.parse({"inspect": recorded, "oom": oom})

    assert parsed("776 3")["oom_kill"] == 3
    assert parsed("1 3")["oom_kill"] is None
    with pytest.raises(ValueError, match="not a count"):
        parsed("776 lots")


def test_import_check_finds_shadowed_and_missing_imports_in_a_real_environment(
    private_dir: Path,
) -> None:
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
    entry = run_here(EnvImports, checkout=str(checkout), venv=venv, modules=names)
    assert entry["error"] is None and entry["python"] == f"{venv}/bin/python"
    assert entry["report"]["python"] == sys.version.split()[0]
    values = {**VALUES, EnvImports: {str(checkout): entry}}
    [finding] = judged(spec, reader(values))
    assert finding.id == "env.imports" and finding.severity == "error"
    real = os.path.realpath(checkout)
    assert finding.actual == (
        f"yaml: from {real}/yaml; docker: a directory without __init__.py: {real}/docker; "
        "no_such_module_here: not found"
    )
    assert finding.message.startswith("yaml, docker, no_such_module_here do not import")
