"""The one-round-trip fact: every read a spec needs, run as one command here for real, each
section handed to its own fact; odd output in one section spoils only that section."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from gpurig.checks import managed
from gpurig.checks.all import check
from gpurig.checks.judge import drift_reads, evaluate, fleet_facts
from gpurig.facts.gpurig_container import ContainerInspect, ContainerTorch
from gpurig.facts.gpurig_files import FileDigests, SecretDigests
from gpurig.facts.gpurig_node import CgroupLeaks
from gpurig.facts.gpurig_nvidia import GpuHealth, NvidiaGpus
from gpurig.facts.gpurig_packages import DebStatus, OsRelease
from gpurig.facts.round_trip import (
    START,
    HostState,
    Recorder,
    Snapshot,
    Unreadable,
    exit_status,
    read_key,
    required_reads,
    sections,
    step,
)
from gpurig.plans import converge_reads, plan_host
from gpurig.spec.model import normalise
from tests.unit.fact_values import framed

SPEC = normalise(
    {
        "engine": "podman",
        "podman_socket": True,
        "nvidia_toolkit": {"version": "1.17.8-1"},
        "driver": {"version": "580.95.05"},
        "compose": {"version": "2.29.7", "sha256": "a" * 64},
        "packages": ["sed", "gpurig-no-such-package"],
        "containers": {"train": {"image": "r/x@sha256:" + "a" * 64, "gpus": "all"}},
        "repos": {"/srv/code": {"url": "https://example.org/c.git", "ref": "b" * 40,
                                "python": {"lockfile": "uv.lock"}}},
        "secrets": [{"src": "/etc/hostname", "dest": "/etc/hostname"}],
        "cleanup": {"ray_sessions": True, "core_files": True, "editable_finders": True,
                    "flashinfer_cache": True},
    }
)  # fmt: skip


def run_here(reads: list) -> tuple[HostState, dict[str, Any]]:
    fact = HostState()
    command = fact.command(reads=reads)
    proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    return fact, fact.process(proc.stdout.splitlines())


def test_every_read_of_a_full_spec_is_answered_by_one_command():
    reads = drift_reads(SPEC)
    judged = {DebStatus, FileDigests, SecretDigests, NvidiaGpus, GpuHealth, ContainerInspect,
              ContainerTorch, CgroupLeaks, OsRelease}  # fmt: skip
    assert {cls for cls, _ in reads} >= judged
    _, values = run_here(reads)
    assert set(values) == {read_key(cls, kwargs) for cls, kwargs in reads}
    assert not [v for v in values.values() if isinstance(v, Unreadable)]
    snapshot = Snapshot(values)
    # The plans find every read they make in the snapshot: no second round trip.
    changes = plan_host(SPEC, snapshot)
    assert "packages.missing" in [c.id for c in changes]
    packages = snapshot(DebStatus, packages=sorted(SPEC["packages"]))
    assert packages["sed"]["version"] and "gpurig-no-such-package" not in packages
    assert snapshot(ContainerInspect, engine="podman", container="train") == {
        "inspect": None, "oom_kill": None
    }  # fmt: skip
    # The checks find every read they make, too, and each reads what this machine printed.
    assert "state.unreadable" not in [f.id for f in check(SPEC, snapshot)]


def test_drift_reads_are_the_converges_and_the_checks():
    """Drift reads what the converge reads plus what the checks and the fleet view judge; the
    converge pays only for the checks of what it manages (gpurig.checks.managed)."""
    converge = {read_key(c, k) for c, k in managed.converge_reads(SPEC)}
    drift = {read_key(c, k) for c, k in drift_reads(SPEC)}
    checks = {read_key(c, k) for c, k in required_reads(lambda r: check(SPEC, r))}
    planned = {read_key(c, k) for c, k in converge_reads(SPEC)}
    assert converge < drift and checks <= drift
    assert converge - planned == {read_key(c, k) for c, k in managed.reads(SPEC)} - planned
    # The release (and the fleet view's kernel): the engine's packages differ by release.
    assert read_key(OsRelease, {}) in converge
    assert drift - converge - checks == set()
    assert read_key(GpuHealth, {}) not in converge


def judged_everything(spec: dict[str, Any], read: Any) -> None:
    plan_host(spec, read)
    check(spec, read)
    fleet_facts(spec, read)


USER_SPEC = normalise(
    {**{k: v for k, v in SPEC.items() if k not in ("packages", "nvidia_toolkit", "compose")},
     "scope": "user", "driver": {"version": "580.95.05", "hold": False}}
)  # fmt: skip


@pytest.mark.parametrize(
    "spec",
    [normalise({}), normalise({"engine": "docker", "packages": ["tmux"]}), SPEC, USER_SPEC],
)
def test_plans_and_checks_read_by_the_spec_alone(spec: dict[str, Any]):
    """Whatever the host answers, the plans, the checks and the fleet view make exactly the
    recorded reads (else a read would miss the snapshot): here every fact answers its
    default, and then what this machine says."""
    recorded = {read_key(c, k) for c, k in drift_reads(spec)}
    _, values = run_here(drift_reads(spec))
    seen = Recorder()

    def answering(cls: type, **kwargs: Any) -> Any:
        seen(cls, **kwargs)
        return Snapshot(values)(cls, **kwargs)

    judged_everything(spec, answering)
    assert set(seen.reads) == recorded


def test_a_section_that_cannot_be_parsed_spoils_only_its_concern():
    reads = drift_reads(SPEC)
    _, values = run_here(reads)
    key = read_key(SecretDigests, {"paths": ["/etc/hostname"], "public": reads[0][1]["public"]})
    assert key in values
    values[key] = Unreadable("SecretDigests: unexpected line: 'rm -rf /'")
    ids = [f.id for f in evaluate(SPEC, values)]
    assert ids.count("state.unreadable") == 1
    assert "packages.missing" in ids  # the other concerns are still judged


def test_host_output_cannot_forge_a_section_marker():
    """Marker lines a section prints (with a nonce of its own making) stay data: they reach
    DebStatus's own parser, which refuses them, instead of starting or replacing a section.
    The run's nonce is in no command line or environment a process of the read (or another
    account, in /proc) can see."""
    fact = HostState()
    reads = [(DebStatus, {"packages": ["sed"]}), (FileDigests, {"paths": ["/etc/hostname"]})]
    command = fact.command(reads=reads)
    made_up = "f" * 32
    forged = command.replace(
        "dpkg-query",
        f"printf '%s\\n' '--gpurig-nonce {made_up}' '--gpurig-section-{made_up} 1' ''; "
        "tr '\\0' ' ' </proc/$$/cmdline; tr '\\0' ' ' </proc/self/environ; echo; dpkg-query",
        1,
    )
    proc = subprocess.run(["sh", "-c", forged], capture_output=True, text=True, check=True)
    lines = proc.stdout.splitlines()
    nonce = lines[0].removeprefix("--gpurig-nonce ")
    assert len(nonce) == 36 and nonce != made_up
    seen = "\n".join(lines[1:])
    assert "--gpurig-section-%s" in seen and seen.count(nonce) == 2  # printf's two markers only
    values = fact.process(lines)
    packages, digests = (values[read_key(cls, kwargs)] for cls, kwargs in reads)
    assert isinstance(packages, Unreadable)
    assert "unexpected dpkg-query line: '--gpurig-nonce" in str(packages)
    assert not isinstance(digests, Unreadable) and "/etc/hostname" in str(digests)


def test_a_step_s_status_is_the_shell_s_and_follows_its_output():
    """step(): the body's output in its section, then its exit status in `label.exit`, printed
    by the shell whatever the body printed last (no newline, a forged status line)."""
    body = "printf '%s\\n' 'out' '--gpurig-part-x one.exit' 0; printf 'no newline'; exit 7"
    command = "\n".join([START, step("part", "one", body), step("part", "two", "true")])
    proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    parts = sections(proc.stdout.splitlines(), "part")
    assert parts["one"] == ["out", "--gpurig-part-x one.exit", "0", "no newline"]
    assert [exit_status("\n".join(parts[k])) for k in ("one.exit", "two.exit")] == [7, 0]


@pytest.mark.parametrize("text", [None, "", "x", "-1", "1234", "٣", "0 0"])
def test_an_exit_status_is_one_to_three_ascii_digits(text: str | None):
    assert exit_status(text) is None


def test_fleet_facts_come_from_the_same_read():
    _, values = run_here(drift_reads(SPEC))
    facts = fleet_facts(SPEC, Snapshot(values))
    assert facts["kernel"] == os.uname().release
    assert facts["code"] == {"/srv/code": None} and facts["image"] == {"train": None}


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_onboardings_own_reads_judge_a_host_with_a_declared_container(engine: str):
    """Onboarding records only its checks' reads before converging: judging them here, for
    real, finds every read it makes (a spec with a container once raised KeyError)."""
    from gpurig.onboard.onboard import host_checks, preflight_reads
    from tests.unit.test_onboard import new_host

    host = new_host({**SPEC, "engine": engine, "podman_socket": engine == "podman"})
    reads = preflight_reads(host)
    assert (ContainerInspect, {"engine": engine, "container": "train"}) in reads
    _, values = run_here(reads)
    checks = {c.name: c for c in host_checks(host, Snapshot(values))}
    assert list(checks) == ["os", "root", "disk", "gpu", "engine", "cgroup"]
    assert "could not be read" not in " ".join(c.detail for c in checks.values())


def test_a_read_missing_from_the_snapshot_is_gpurigs_bug_not_the_hosts():
    """A KeyError in gpurig (a read its own recording did not list) fails tests, and in a run
    is reported as gpurig's own bug, never as the host's unreadable output."""
    from gpurig.checks.judge import Probed, report
    from gpurig.spec.inventory import Host, SshSettings

    _, values = run_here(drift_reads(SPEC))
    del values[read_key(NvidiaGpus, {})]
    for judge in (lambda: evaluate(SPEC, values), lambda: fleet_facts(SPEC, Snapshot(values))):
        with pytest.raises(KeyError, match="NvidiaGpus"):
            judge()
    host = Host("h", "192.0.2.1", SshSettings(), (), SPEC, "test", 1)
    [finding] = report(Probed(host, values)).findings
    assert finding.id == "gpurig.internal_error" and "KeyError" in finding.actual


def test_a_fact_failing_on_its_own_is_gpurigs_bug_not_the_hosts():
    """A parser's refusal (ValueError, an XML ParseError) is the host's odd output; any other
    exception in a fact's process() is gpurig's bug: raised as FactFailed by the snapshot,
    gpurig.internal_error in a run, never state.unreadable."""
    from gpurig.checks.judge import Probed, report
    from gpurig.facts.gpurig_nvidia import KernelLog
    from gpurig.facts.round_trip import FactFailed
    from gpurig.spec.inventory import Host, SshSettings

    def broken(parts: Any) -> Any:
        return parts["no such part"]  # KeyError: the fact's own bug

    fact = HostState()
    fact.command(reads=[(KernelLog, {})])
    fact._facts[0][0].parse = broken  # the instance HostState hands the section to
    values = fact.process(framed("section", {"0": framed("part", {"gpu_lines": ["x"]})}))
    with pytest.raises(FactFailed, match=r"KernelLog\.process: KeyError"):
        Snapshot(values)(KernelLog)
    _, real = run_here(drift_reads(SPEC))
    real[read_key(KernelLog, {})] = values[read_key(KernelLog, {})]
    host = Host("h", "192.0.2.1", SshSettings(), (), SPEC, "test", 1)
    [finding] = report(Probed(host, real)).findings
    assert finding.id == "gpurig.internal_error" and "KernelLog.process: KeyError" in finding.actual


def test_every_fact_names_its_arguments() -> None:
    """pyinfra passes a fact's arguments by the names in its command()'s signature: a command
    taking *args or **kwargs (a wrapper's) fails when pyinfra's converge reads it."""
    import inspect as pyinspect
    import pkgutil
    from importlib import import_module

    from pyinfra.api.arguments import all_global_arguments

    from gpurig import facts
    from gpurig.facts.reader import Reader

    classes = set()
    for module in pkgutil.iter_modules(facts.__path__):
        loaded = import_module(f"gpurig.facts.{module.name}")
        classes |= {c for c in vars(loaded).values()
                    if isinstance(c, type) and issubclass(c, Reader)}  # fmt: skip
    assert len(classes) > 30
    variadic = (pyinspect.Parameter.VAR_POSITIONAL, pyinspect.Parameter.VAR_KEYWORD)
    # pyinfra's own FactBase refuses these names (its global arguments, `name` among them).
    reserved = {name for name, _ in all_global_arguments()}
    for cls in [c for c in classes if hasattr(c, "command")]:  # not the bases
        parameters = pyinspect.signature(cls.command).parameters.values()
        assert not [p for p in parameters if p.kind in variadic], cls.__name__
        assert not {p.name for p in parameters} & reserved, cls.__name__


@pytest.mark.skipif(os.geteuid() != 0, reason="the root prefix applies only to a read as root")
@pytest.mark.parametrize(
    "home", ["another account's", "others may write", "root's alone", "root's link in hers"]
)
def test_as_root_no_login_file_or_env_file_another_account_can_change_runs(tmp_path, home):
    """A careless wrapper's environment (another account's HOME, a BASH_ENV) reaches the
    probe's login shell (`bash -lc`, for the login core-dump limit): as root it reads no file
    another account can change, and no file BASH_ENV or ENV names."""
    import pwd

    ran, where = tmp_path / "ran", tmp_path / "home"
    where.mkdir()
    given = str(where)
    for name in (".profile", ".bash_profile", "env.sh"):
        (where / name).write_text(f"echo {name} >> {ran}\n")
    if home == "another account's":
        os.chown(where, 65534, 65534)
    elif home == "others may write":
        where.chmod(0o1777)
    elif home == "root's link in hers":  # a link root made, in a directory she can change
        theirs = tmp_path / "alice"
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)
        (theirs / "home").symlink_to(where)
        given = f"{theirs}/home/"  # with a slash: the old `find -maxdepth 0` followed it
    # The effective uid's function, the walk, and the root prefix that asks them.
    from gpurig.facts.safe_path import SAFE_PATH

    lines = HostState().command([]).splitlines()
    prefix = SAFE_PATH + "\n".join(line for line in lines if "gpurig_euid" in line)
    done = subprocess.run(
        ["/bin/sh", "-c", f"{prefix}\nbash -lc 'echo \"$HOME\"'"],
        env={"HOME": given, "BASH_ENV": str(where / "env.sh"),
             "ENV": str(where / "env.sh"), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    seen = done.stdout.strip().splitlines()[-1]
    if home == "root's alone":  # root's own choice of HOME is kept, its profile read
        assert seen == str(where) and ran.read_text() == ".bash_profile\n"
    else:
        assert seen == pwd.getpwuid(0).pw_dir
        assert not ran.exists(), ran.read_text()


def test_a_body_shares_the_read_s_shell_only_where_the_values_are_the_same(
    monkeypatch: pytest.MonkeyPatch,
):
    """Sections run in the read's own shell where nothing in them can leak (no fork each):
    every fact of a full spec and of a node contract gets the same values as with every
    section in a subshell, and most of a contract's sections need no subshell."""
    from gpurig.facts import round_trip
    from gpurig.node import modes as node_modes

    for reads in (drift_reads(SPEC), drift_reads(SPEC, node_modes.mode("npd").scope)):
        fact, shared = run_here(reads)
        command = fact.command(reads=reads)
        monkeypatch.setattr(round_trip, "shares_shell", lambda body: False)
        _, alone = run_here(reads)
        monkeypatch.undo()
        assert _stable(shared) == _stable(alone)
        assert command.count("\n{\n") > command.count("\n(\n")


def _stable(values: dict[str, Any]) -> dict[str, Any]:
    """The values but those that change from second to second on a running machine (its
    number of cgroups), and the secrets' digests (keyed afresh for each command)."""
    moving = ("SecretDigests", "CgroupLeaks")
    return {k: v for k, v in values.items() if not any(f".{m}:" in k for m in moving)}


# Each would change what a later section sees, or end the read: each runs in a subshell.
CHANGES_SHELL = [
    "exit 0", "cd /tmp", "cd", "set -e", "set -- a b", "PATH=/nonexistent", "HOME=/tmp; true",
    "export x=1", "IFS=:", "x=1 IFS=: ; true", "unset PATH", "f() { :; }", "printf() { :; }",
    "return 0", "read -r HOME </etc/hostname", "gpurig_nonce=forged", ": ${x:=1}",
    ": ${PATH:?}", ". /dev/null", "ulimit -c 0", "umask 077", "trap 'echo trapped' EXIT",
    "exec 2>&1", "eval 'cd /tmp'", "alias ls=false", "shift", "getopts a x", "sleep 0 &",
    "(exit 1); exit", "true;exit", "printf -v x 1", "readonly x", "x=1;cd;", "local x=1",
    ": >/nonexistent/x", "true && : 2>/nonexistent/x", "times >/nonexistent/x",
    "echo $((1/0))", "echo a$((1/0))", "i=$((i+))", "let x=1/0", "i=0; i=$((i+1)); echo $i",
]  # fmt: skip
SHARES_SHELL = [
    "[ -c /dev/null ] && echo null", "id -un 2>/dev/null", "i=0; echo $i",
    "while IFS= read -r l; do echo \"$l\"; done </etc/hostname",
    "f=$(uname -r) && printf '%s\\n' \"$f\"", "uname -r 2>&1 >/dev/null && true",
    "systemctl is-enabled x 2>/dev/null; echo /usr/local/bin local_link_errors reset",
    "if [ -e /nonexistent ]; then :; else echo no; fi", "IFS=: read -r a b </etc/hostname",
]  # fmt: skip
AFTER = 'pwd; printf "%s|%s|%s|%s|%s\\n" "$PATH" "$HOME" "$IFS" "$x" "$gpurig_nonce"; umask; trap'


def _after(body: str) -> list[str]:
    """What a section printing the shell's state prints after a section running `body`."""
    from gpurig.facts.round_trip import section

    command = "\n".join([START, section("part", "one", body), section("part", "two", AFTER)])
    proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True, cwd="/",
                          env={"PATH": "/usr/bin:/bin", "HOME": "/root"}, timeout=10)  # fmt: skip
    nonce = proc.stdout.split("\n", 1)[0].removeprefix("--gpurig-nonce ")
    return [line.replace(nonce, "NONCE") for line in sections(proc.stdout.splitlines(), "part")
            .get("two", ["(the read ended)"])]  # fmt: skip


@pytest.mark.parametrize("body", CHANGES_SHELL)
def test_a_body_that_could_change_the_read_s_shell_runs_in_a_subshell(body: str):
    from gpurig.facts.round_trip import shares_shell

    assert not shares_shell(body)
    assert _after(body) == _after(":")


@pytest.mark.parametrize("body", SHARES_SHELL)
def test_a_body_that_keeps_to_its_own_variables_runs_in_the_read_s_shell(body: str):
    from gpurig.facts.round_trip import shares_shell

    assert shares_shell(body)
    assert _after(body) == _after(":")


def test_what_a_section_inside_a_body_does_stays_in_its_subshell():
    """A Sectioned fact's parts: the one that exits runs in a subshell, the body around it in
    the read's shell, and the read goes on after both."""
    from gpurig.facts.round_trip import NONCE_LINE, section, shares_shell

    inner = section("part", "x", "[ -e /nonexistent ] || exit 0\necho unreachable")
    assert inner.endswith(
        "\n(\n[ -e /nonexistent ] || exit 0\necho unreachable\n) </dev/null || true"
    )
    assert shares_shell(f"{NONCE_LINE}\n{inner}")
    body = f"{NONCE_LINE}\n{inner}\n{section('part', 'y', 'echo y')}"
    assert _after(body) == _after(":")


@pytest.mark.parametrize(
    ("nonce", "taken"),
    [("0" * 32, True), ("a1b2c3d4-e5f6-4789-8abc-def012345678", True), ("f" * 36, True),
     ("0" * 31, False), ("0" * 37, False), ("A" * 32, False), ("g" * 32, False), ("", False),
     ("0" * 31 + "\u0661", False), ("0" * 31 + " ", False)],
)  # fmt: skip
def test_only_a_nonce_as_the_kernel_spells_one_opens_sections(nonce: str, taken: bool):
    lines = [f"--gpurig-nonce {nonce}", f"--gpurig-part-{nonce} x", "value"]
    assert sections(lines, "part") == ({"x": ["value"]} if taken else {})
