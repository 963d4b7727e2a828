"""The one-round-trip fact: every read a spec needs, run as one command here for real, each
section handed to its own fact; odd output in one section spoils only that section."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from facts.gpurig_files import FileDigests, SecretDigests
from facts.gpurig_host import HostState, Recorder, Snapshot, Unreadable, read_key, required_reads
from facts.gpurig_packages import DebStatus
from facts.probe import Probe
from gpurig.drift import drift_reads, evaluate, fleet_facts
from gpurig.plans import converge_reads, plan_host
from gpurig.spec import normalise

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
    assert {cls for cls, _ in reads} >= {Probe, DebStatus, SecretDigests}
    _, values = run_here(reads)
    assert set(values) == {read_key(cls, kwargs) for cls, kwargs in reads}
    assert not [v for v in values.values() if isinstance(v, Unreadable)]
    snapshot = Snapshot(values)
    # The plans find every read they make in the snapshot: no second round trip.
    changes = plan_host(SPEC, snapshot)
    assert "packages.missing" in [c.id for c in changes]
    packages = snapshot(DebStatus, packages=sorted(SPEC["packages"]))
    assert packages["sed"]["version"] and "gpurig-no-such-package" not in packages
    assert snapshot(Probe, engine="podman", paths=["/tmp", "/srv/code"], containers=["train"])


def test_converge_reads_are_the_drift_reads_without_the_probe():
    converge = {read_key(c, k) for c, k in converge_reads(SPEC)}
    drift = {read_key(c, k) for c, k in drift_reads(SPEC)}
    assert drift - converge == {read_key(Probe, {"engine": "podman", "paths": ["/tmp", "/srv/code"],
                                                 "containers": ["train"]})}  # fmt: skip


USER_SPEC = normalise(
    {**{k: v for k, v in SPEC.items() if k not in ("packages", "nvidia_toolkit", "compose")},
     "scope": "user", "driver": {"version": "580.95.05", "hold": False}}
)  # fmt: skip


@pytest.mark.parametrize(
    "spec",
    [normalise({}), normalise({"engine": "docker", "packages": ["tmux"]}), SPEC, USER_SPEC],
)
def test_plans_read_by_the_spec_alone(spec: dict[str, Any]):
    """Whatever the host answers, the plans make exactly the recorded reads (else a read would
    miss the snapshot): here every fact answers its default, and then what this machine says."""
    recorded = {read_key(c, k) for c, k in required_reads(lambda r: plan_host(spec, r))}
    _, values = run_here(converge_reads(spec))
    seen = Recorder()

    def answering(cls: type, **kwargs: Any) -> Any:
        seen(cls, **kwargs)
        return Snapshot(values)(cls, **kwargs)

    plan_host(spec, answering)
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
    """A section printing this run's own marker (a local user can read the nonce in /proc and
    name a file after it) stays data: it reaches DebStatus's own parser, which refuses the
    line, instead of starting or replacing a section."""
    fact = HostState()
    reads = [(DebStatus, {"packages": ["sed"]}), (FileDigests, {"paths": ["/etc/hostname"]})]
    command = fact.command(reads=reads)
    marker = fact._marker
    forged = command.replace(
        "dpkg-query", f"printf '%s\\n' '{marker} 1' '' '{marker} 0'; dpkg-query", 1
    )
    proc = subprocess.run(["sh", "-c", forged], capture_output=True, text=True, check=True)
    assert proc.stdout.splitlines().count(f"{marker} 1") == 1  # the real one; the forged is data
    values = fact.process(proc.stdout.splitlines())
    packages, digests = (values[read_key(cls, kwargs)] for cls, kwargs in reads)
    assert isinstance(packages, Unreadable)
    assert f"unexpected dpkg-query line: '{marker} 1'" in str(packages)
    assert not isinstance(digests, Unreadable) and "/etc/hostname" in str(digests)


def test_fleet_facts_come_from_the_same_read():
    _, values = run_here(drift_reads(SPEC))
    facts = fleet_facts(SPEC, values)
    assert facts["kernel"] == os.uname().release
    assert facts["code"] == {"/srv/code": None} and facts["image"] == {"train": None}


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_the_probes_own_reads_hold_the_declared_containers_inspect(engine: str):
    """Onboarding records only the probe's reads before converging: judging them must find
    every read it makes (a spec with a container once raised KeyError in preflight)."""
    from facts.gpurig_container import ContainerInspect
    from gpurig.drift import probe_of, probe_reads

    spec = normalise({**SPEC, "engine": engine, "podman_socket": engine == "podman"})
    reads = probe_reads(spec)
    assert (ContainerInspect, {"engine": engine, "container": "train"}) in reads
    _, values = run_here(reads)
    probe = probe_of(spec, Snapshot(values))
    assert [c["name"] for c in probe["containers"]] == ["train"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the root prefix applies only to a read as root")
@pytest.mark.parametrize("home", ["another account's", "others may write", "root's alone"])
def test_as_root_no_login_file_or_env_file_another_account_can_change_runs(tmp_path, home):
    """A careless wrapper's environment (another account's HOME, a BASH_ENV) reaches the
    probe's login shell (`bash -lc`, for the login core-dump limit): as root it reads no file
    another account can change, and no file BASH_ENV or ENV names."""
    import pwd

    ran, where = tmp_path / "ran", tmp_path / "home"
    where.mkdir()
    for name in (".profile", ".bash_profile", "env.sh"):
        (where / name).write_text(f"echo {name} >> {ran}\n")
    if home == "another account's":
        os.chown(where, 65534, 65534)
    elif home == "others may write":
        where.chmod(0o1777)
    prefix = HostState().command([]).splitlines()[0]
    done = subprocess.run(
        ["/bin/sh", "-c", f"{prefix}\nbash -lc 'echo \"$HOME\"'"],
        env={"HOME": str(where), "BASH_ENV": str(where / "env.sh"),
             "ENV": str(where / "env.sh"), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    seen = done.stdout.strip().splitlines()[-1]
    if home == "root's alone":  # root's own choice of HOME is kept, its profile read
        assert seen == str(where) and ran.read_text() == ".bash_profile\n"
    else:
        assert seen == pwd.getpwuid(0).pw_dir
        assert not ran.exists(), ran.read_text()
