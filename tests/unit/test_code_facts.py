"""The code facts run for real here (git, uv, pip, sh), and the repo, python_env and cleanup
operations' commands run against what they found: the fixtures in tests/unit/operations say
which commands; these say the commands do what they claim on real checkouts."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyinfra.api import OperationError
from pyinfra.context import ctx_host

from gpurig.deploys import cleanup, repos
from gpurig.facts import gpurig_files
from gpurig.facts.gpurig_cleanup import CoreFiles, EditableFinders, FlashinferCache, RaySessions
from gpurig.facts.gpurig_files import MODP_2048, SecretDigests
from gpurig.facts.gpurig_repo import LOCK_MARKER, RepoState
from gpurig.plans import cleanup as cleanup_plan
from gpurig.plans import repos as repos_plan
from gpurig.plans.change import Change
from gpurig.plans.repos import env_marker
from gpurig.plans.secrets import local_digest, public, shared_key
from gpurig.spec.model import normalise
from tests.lockproject import make_project

FIXTURES = Path(__file__).parents[1] / "fixtures" / "code"
GIT_ID = ["-c", "user.name=t", "-c", "user.email=t@t"]


def sh(command: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    proc = subprocess.run(
        ["sh", "-c", command],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
    assert proc.returncode == 0, f"{command}\n{proc.stderr}"
    return proc.stdout


def fact(
    cls: type, env: dict[str, str] | None = None, cwd: Path | None = None, **kwargs: Any
) -> Any:
    """The fact's command run here, its output through process(), or default() when there is
    none: what pyinfra does."""
    instance = cls()
    lines = sh(instance.command(**kwargs), env, cwd).splitlines()
    return instance.process(lines) if lines else instance.default()


class LocalHost:
    """Just enough of pyinfra's host for an operation: real facts, recorded no-ops."""

    name = "local"
    state = type("State", (), {"is_executing": False})()
    noop_description: str | None = None

    def get_fact(self, cls: type, **kwargs: Any) -> Any:
        return fact(cls, **kwargs)

    def noop(self, description: str) -> None:
        self.noop_description = description


def apply(op: Any, **kwargs: Any) -> tuple[list[str], str | None]:
    """Run an operation's commands here; returns their outputs and the no-op description."""
    host = LocalHost()
    with ctx_host.use(host):
        commands = [str(c) for c in op._inner(**kwargs)]
    return [sh(c) for c in commands], host.noop_description


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *GIT_ID, *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def origin(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A bare repository with one commit holding a CRLF script; and a clone to push from."""
    bare, work = tmp_path / "origin.git", tmp_path / "author"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    subprocess.run(["git", "clone", "-q", str(bare), str(work)], check=True, capture_output=True)
    git(work, "config", "core.autocrlf", "false")
    (work / "run.sh").write_bytes(b"#!/bin/sh\r\necho hi\r\n")
    (work / "train.py").write_bytes(b"print('train')\n")
    git(work, "add", ".")
    git(work, "commit", "-qm", "first")
    git(work, "push", "-q", "origin", "HEAD:main")
    yield str(bare), work


CONVERGED = "{} is at its commit"


def converge_repo(path: Path, url: str, ref: str) -> tuple[list[str], str | None]:
    spec = normalise({"repos": {str(path): {"url": url, "ref": ref}}})
    return apply(repos.checkout, spec=spec, path=str(path))


def clean(spec: dict[str, Any], **fixed: Any) -> list[str]:
    """The cleanup plan on real facts (their arguments overridden by `fixed`), its commands
    run here: what the converge does, without touching this machine's own /tmp."""
    read = lambda cls, **kwargs: fact(cls, **{**kwargs, **fixed})  # noqa: E731
    return [sh(cleanup.commands(c)) for c in cleanup_plan.plan(normalise(spec), read)]


def test_clone_checks_out_the_pin_with_lf_and_a_clean_tree(private_dir: Path, origin):
    url, work = origin
    ref = git(work, "rev-parse", "HEAD")
    checkout = private_dir / "deep" / "code"
    outputs, _ = converge_repo(checkout, url, ref)
    assert "gpurig: LF line endings: run.sh" in "".join(outputs)
    assert (checkout / "run.sh").read_bytes() == b"#!/bin/sh\necho hi\n"
    state = fact(RepoState, path=str(checkout), ref=ref)
    assert state["head"] == ref and state["has_ref"] and state["origin"] == url
    assert state["dirt"] == [] and state["crlf"] == [] and state["eol_only"] == ["run.sh"]
    assert state["attributes"] == ["*.sh text eol=lf", "*.py text eol=lf"]
    assert git(checkout, "status", "--porcelain", "--untracked-files=all") == "M run.sh"
    assert converge_repo(checkout, url, ref) == ([], CONVERGED.format(checkout))


def test_moving_the_pin_moves_the_checkout(private_dir: Path, origin):
    url, work = origin
    first = git(work, "rev-parse", "HEAD")
    checkout = private_dir / "code"
    converge_repo(checkout, url, first)
    (work / "run.sh").write_bytes(b"#!/bin/sh\r\necho two\r\n")
    git(work, "commit", "-qam", "second")
    git(work, "push", "-q", "origin", "HEAD:main")
    second = git(work, "rev-parse", "HEAD")
    converge_repo(checkout, url, second)
    assert git(checkout, "rev-parse", "HEAD") == second
    assert (checkout / "run.sh").read_bytes() == b"#!/bin/sh\necho two\n"
    converge_repo(checkout, url, first)  # and back, without a fetch
    assert git(checkout, "rev-parse", "HEAD") == first


def test_dirty_tree_is_refused_and_left_alone(private_dir: Path, origin):
    url, work = origin
    ref = git(work, "rev-parse", "HEAD")
    checkout = private_dir / "code"
    converge_repo(checkout, url, ref)
    (checkout / "train.py").write_text("print('my fix')\n")
    assert fact(RepoState, path=str(checkout), ref=ref)["dirt"] == [" M train.py"]
    with pytest.raises(OperationError, match=r"no uncommitted changes, found M train\.py"):
        converge_repo(checkout, url, ref)
    assert (checkout / "train.py").read_text() == "print('my fix')\n"


def test_local_commit_is_refused(private_dir: Path, origin):
    url, work = origin
    ref = git(work, "rev-parse", "HEAD")
    checkout = private_dir / "code"
    converge_repo(checkout, url, ref)
    git(checkout, "switch", "-q", "-c", "mine")
    (checkout / "new.txt").write_text("x\n")
    git(checkout, "add", "new.txt")
    git(checkout, "commit", "-qm", "local only")
    state = fact(RepoState, path=str(checkout), ref=ref)
    assert [line.split(" ", 1)[1] for line in state["local"]] == ["local only"]
    with pytest.raises(OperationError, match=r"no commits missing from the remote, found .* local"):
        converge_repo(checkout, url, ref)
    assert git(checkout, "log", "-1", "--format=%s") == "local only"


def test_directory_that_is_not_a_checkout_is_refused(private_dir: Path, origin):
    url, work = origin
    (private_dir / "code" / "sub").mkdir(parents=True)
    state = fact(RepoState, path=str(private_dir / "code" / "sub"), ref="0" * 40)
    assert state["exists"] and not state["checkout"]
    with pytest.raises(OperationError, match="a directory that is not one"):
        converge_repo(private_dir / "code" / "sub", url, git(work, "rev-parse", "HEAD"))


@pytest.mark.parametrize(("manager", "lockfile"), [("uv", "uv.lock"), ("pip", "requirements.txt")])
def test_locked_environment_installs_keeps_and_follows_the_lockfile(
    tmp_path: Path, private_dir: Path, manager: str, lockfile: str
):
    if not shutil.which("uv"):
        pytest.skip("uv is not installed")
    project = private_dir / "proj"
    wheels = {"alpha": ["1.0", "1.1"], "keepme": ["2.0"]}
    make_project(project, {"alpha": "1.0", "keepme": "2.0"}, wheels)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    git(project, "add", ".")
    git(project, "commit", "-qm", "lock")
    origin = str(tmp_path / "origin.git")
    subprocess.run(["git", "init", "-q", "--bare", origin], check=True)
    git(project, "remote", "add", "origin", origin)
    git(project, "push", "-q", "origin", "HEAD:main")
    ref, venv = git(project, "rev-parse", "HEAD"), str(project / ".venv")
    python = {"lockfile": lockfile, "venv": venv, "manager": manager, "keep": ["keepme"]}

    def install() -> list[str]:
        spec = normalise({"repos": {str(project): {"url": origin, "ref": ref, "python": python}}})
        env = [c for c in repos_plan.plan(spec, fact) if c.id == "repo.env"]
        return [sh(command) for change in env for command in repos.commands(change)]

    install()
    site = next(Path(venv).glob("lib/python*/site-packages"))
    assert (site / "alpha" / "__init__.py").read_text() == '__version__ = "1.0"\n'
    assert not (site / "keepme").exists()  # left to the system's site-packages
    assert "include-system-site-packages = true" in (Path(venv) / "pyvenv.cfg").read_text()
    state = fact(RepoState, path=str(project), ref=ref, lockfile=lockfile, venv=venv)
    assert state["installed"] == env_marker(state["lockfile_sha256"], ["keepme"])
    assert install() == []

    python["keep"] = []  # a change to `keep` alone is drift
    assert (
        repos_plan.plan(
            normalise({"repos": {str(project): {"url": origin, "ref": ref, "python": python}}}),
            fact,
        )[-1].id
        == "repo.env"
    )
    python["keep"] = ["keepme"]

    make_project(project, {"alpha": "1.1", "keepme": "2.0"}, wheels)
    git(project, "commit", "-qam", "bump alpha")
    git(project, "push", "-q", "origin", "HEAD:main")
    ref = git(project, "rev-parse", "HEAD")
    state = fact(RepoState, path=str(project), ref=ref, lockfile=lockfile, venv=venv)
    assert state["installed"] != env_marker(state["lockfile_sha256"], ["keepme"])  # drift
    install()
    assert (site / "alpha" / "__init__.py").read_text() == '__version__ = "1.1"\n'
    marker = (Path(venv) / LOCK_MARKER).read_text().strip()
    assert marker == env_marker(state["lockfile_sha256"], ["keepme"])


def test_lockfile_that_does_not_match_the_project_fails_with_uvs_message(tmp_path: Path):
    if not shutil.which("uv"):
        pytest.skip("uv is not installed")
    project = tmp_path / "proj"
    make_project(project, {"alpha": "1.0"}, {"alpha": ["1.0", "1.1"]})
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text.replace("alpha==1.0", "alpha==1.1"))
    data = {"path": str(project), "venv": str(project / ".venv")}
    command = repos._guarded(data, repos._install("uv", "uv.lock", []))
    proc = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    assert proc.returncode != 0 and "needs to be updated" in proc.stderr


def test_secret_digest_is_keyed_by_an_exchange_and_names_no_content(tmp_path: Path):
    """The host's own python3 answers the exchange; this run's key gives the same HMAC."""
    secret = tmp_path / "token"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)
    (tmp_path / "link").symlink_to(secret)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    paths = [str(secret), str(tmp_path / "none"), str(tmp_path / "link"), str(fifo)]
    command = SecretDigests().command(paths=paths, public=public())
    found = fact(SecretDigests, paths=paths, public=public())
    key = shared_key(found["public"])
    assert found["files"][str(secret)]["sha256"] == local_digest(str(secret), key)
    assert found["files"][str(secret)]["sha256"] != sh(f"sha256sum {secret}").split()[0]
    assert found["files"][str(secret)]["mode"] == "600"
    assert [found["files"][p] for p in paths[1:]] == [None, None, None]  # no symlink, no FIFO
    assert "s3cret" not in command and "s3cret" not in sh(command)
    assert local_digest(str(tmp_path / "none"), key) is None


def test_secret_digests_say_when_the_host_has_no_python3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(gpurig_files, "PYTHON", str(tmp_path / "python3"))  # not there
    found = fact(SecretDigests, paths=["/etc/hostname"], public=public())
    assert found == {"public": None, "files": {"/etc/hostname": None}}


def test_the_exchange_uses_rfc_3526_group_14():
    from paramiko.kex_group14 import KexGroup14

    assert MODP_2048 == KexGroup14.P and KexGroup14.G == 2


def test_core_files_are_found_by_their_elf_header(tmp_path: Path):
    if Path("/proc/sys/kernel/core_pattern").read_text().strip() != "core":
        pytest.skip("core_pattern does not write ./core here")
    subprocess.run(
        ["sh", "-c", f"cd {tmp_path} && ulimit -c unlimited && exec sh -c 'kill -SEGV $$'"],
        check=False,
    )
    if not (tmp_path / "core").exists():
        pytest.skip("no core file was written (hard limit 0?)")
    (tmp_path / "core.123").write_text("not a core, just named like one\n")
    (tmp_path / "core.456").symlink_to(tmp_path / "core")
    found = fact(CoreFiles, dirs=[str(tmp_path)])
    assert found == {str(tmp_path / "core"): (tmp_path / "core").stat().st_size}
    spec = {"cleanup": {"core_files": True}}
    outputs = clean(spec, dirs=[str(tmp_path)])
    assert "gpurig: freed 1 core file, " in outputs[0]
    assert not (tmp_path / "core").exists() and (tmp_path / "core.123").exists()
    assert clean(spec, dirs=[str(tmp_path)]) == []


def test_stale_editable_finder_goes_and_a_live_one_stays(tmp_path: Path):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    finder = (FIXTURES / "editable_finder_setuptools-84.2.1.txt").read_text()
    pth = (FIXTURES / "editable_pth_setuptools-84.2.1.txt").read_text()
    (tmp_path / "live").mkdir()
    for name, target in (("proj_0", tmp_path / "gone"), ("live_0", tmp_path / "live")):
        text = finder.replace("@TARGET@", str(target)).replace("proj_0", name)
        (site / f"__editable___{name}_finder.py").write_text(text)
        (site / f"__editable__.{name}.pth").write_text(pth.replace("proj_0", name))
    found = fact(EditableFinders, venvs=[str(tmp_path / "venv")])
    stale = str(site / "__editable___proj_0_finder.py")
    assert found == {stale: [str(site / "__editable__.proj_0.pth")]}
    repo = {
        "url": "unused",
        "ref": "0" * 40,
        "python": {"lockfile": "uv.lock", "venv": str(tmp_path / "venv")},
    }
    clean({"cleanup": {"editable_finders": True}, "repos": {str(tmp_path / "proj"): repo}})
    assert sorted(p.name for p in site.iterdir()) == [
        "__editable__.live_0.pth",
        "__editable___live_0_finder.py",
    ]


def test_flashinfer_cache_older_than_the_package_is_stale(tmp_path: Path):
    cache = tmp_path / "home" / ".cache" / "flashinfer" / "90"
    cache.mkdir(parents=True)
    (cache / "kernel.so").write_bytes(b"\0" * 4096)
    os.utime(cache / "kernel.so", (1000, 1000))
    os.utime(cache, (1000, 1000))
    os.utime(cache.parent, (1000, 1000))
    venv = tmp_path / "venv"
    package = venv / "lib" / "python3.11" / "site-packages" / "flashinfer"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    # The environment's interpreter is never started: a .pth file there would run code.
    (package.parent / "boom.pth").write_text(f"import os; os.mkdir({str(tmp_path / 'ran')!r})\n")
    pythons = [f"{venv}/bin/python", "python3"]
    # PYTHONPATH is ignored (python3 -I): it could name a directory another account writes.
    env = {"HOME": str(tmp_path / "home"), "PYTHONPATH": str(package.parent)}
    found = fact(FlashinferCache, env=env, pythons=pythons)
    assert found["cache"]["path"] == str(cache.parent) and found["cache"]["mtime"] == 1000
    assert found["installed"] == {f"{venv}/bin/python": found["installed"][pythons[0]]}
    assert found["installed"][pythons[0]] > 1000
    assert cleanup_plan.flashinfer_stale(found)
    os.utime(package / "__init__.py", (500, 500))
    assert not cleanup_plan.flashinfer_stale(fact(FlashinferCache, env=env, pythons=pythons))
    assert fact(FlashinferCache, env={"HOME": str(tmp_path)}, pythons=pythons)["cache"] is None
    assert not (tmp_path / "ran").exists()


def test_python_facts_never_import_from_the_working_directory(tmp_path: Path):
    """A glob.py (or any module the facts' python imports) where the shell stands never runs."""
    for module in ("glob", "ast", "importlib"):
        (tmp_path / f"{module}.py").write_text(f"import os; os.mkdir({str(tmp_path / 'ran')!r})\n")
    (tmp_path / "home" / ".cache" / "flashinfer").mkdir(parents=True)
    env = {"HOME": str(tmp_path / "home")}
    fact(EditableFinders, env=env, cwd=tmp_path, venvs=[str(tmp_path / "venv")])
    fact(FlashinferCache, env=env, cwd=tmp_path, pythons=["python3"])
    assert not (tmp_path / "ran").exists()


def test_what_the_cleanup_freed_counts_one_as_one():
    one = {
        "cleanup.core_files": ({"files": {"/tmp/core.1": 1}}, "1 core file, 1 byte"),
        "cleanup.ray_sessions": (
            {"stale": {"/tmp/ray/session_1": 4}},
            "1 stale Ray session, 4 KiB",
        ),
        "cleanup.editable_finders": (
            {"finders": {"/f.py": ["/f.pth"]}},
            "1 stale editable finder: /f.py",
        ),
    }
    for change_id, (data, freed) in one.items():
        command = cleanup.commands(Change(change_id, "leftovers", "", "", "", data=data))
        assert f"echo 'gpurig: freed {freed}'" in command


def test_ray_sessions_fact_sees_live_ray_and_the_latest_session():
    if Path("/tmp/ray").exists():
        pytest.skip("/tmp/ray exists on this machine; not touching it")
    if not shutil.which("bash") or not shutil.which("pgrep"):
        pytest.skip("needs bash and pgrep")
    try:
        for name in ("session_1", "session_2"):
            Path("/tmp/ray", name).mkdir(parents=True)
        Path("/tmp/ray/session_latest").symlink_to("/tmp/ray/session_2")
        found = fact(RaySessions)
        assert found["running"] == [] and found["latest"] == "/tmp/ray/session_2"
        assert sorted(found["sessions"]) == ["/tmp/ray/session_1", "/tmp/ray/session_2"]
        raylet = subprocess.Popen(["bash", "-c", "exec -a raylet sleep 60"])
        try:
            assert any(str(raylet.pid) in line for line in fact(RaySessions)["running"])
            assert clean({"cleanup": {"ray_sessions": True}}) == []
        finally:
            raylet.send_signal(signal.SIGKILL)
            raylet.wait()
        outputs = clean({"cleanup": {"ray_sessions": True}})
        assert "freed 1 stale Ray session, " in outputs[0]
        assert sorted(p.name for p in Path("/tmp/ray").iterdir()) == [
            "session_2",
            "session_latest",
        ]
    finally:
        shutil.rmtree("/tmp/ray", ignore_errors=True)


def test_a_checkout_another_account_can_change_is_refused_before_anything_runs(
    private_dir: Path, tmp_path: Path, origin
):
    """As root the converge runs git, uv and pip in a checkout: never in one another account
    can change, nor where one could swap it (a directory a group or others may write), read
    by RepoState on this machine. Nothing is cloned or run there."""
    url, work = origin
    ref = git(work, "rev-parse", "HEAD")
    theirs, shared = private_dir / "alice", private_dir / "shared"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    shared.mkdir(mode=0o775)
    shared.chmod(0o775)
    for place, said in (
        (theirs / "code", "uid 65534 owns it or a directory above it"),
        (shared / "code", f"a group or other accounts may write {shared}"),
        (Path("/tmp/code"), "other accounts may write /tmp"),
    ):
        state = fact(RepoState, path=str(place), ref=ref, venv=str(place / ".venv"))
        assert "65534" in state["writers"] or f"refused {said}" in state["writers"], state
        spec = normalise({"repos": {str(place): {"url": url, "ref": ref}}})
        [change] = repos_plan.plan(spec, lambda cls, **kw: fact(cls, **kw))
        assert (change.id, change.refused, change.actual) == ("repo.writable", True, said)
        with pytest.raises(OperationError, match="changeable by root alone"):
            converge_repo(place, url, ref)
        assert not place.exists()
    # root's own directory: cloned as before
    assert fact(RepoState, path=str(private_dir / "code"), ref=ref)["writers"] == ["0"]


FSMONITOR = "#!/bin/sh\nid -u >> {marker}\n"


def _plant_fsmonitor(checkout: Path, place: Path) -> Path:
    """A program `git status` runs (core.fsmonitor), set in the checkout's config as a group
    member could: it records the uid it ran as."""
    marker, program = place / "ran-as", place / "fsmonitor"
    program.write_text(FSMONITOR.format(marker=marker))
    program.chmod(0o755)
    git(checkout, "config", "core.fsmonitor", str(program))
    return marker


@pytest.mark.parametrize(
    ("attack", "said"),
    [
        ("chmod -R g+w {c}", "a group or other accounts may write {c}"),
        ("chmod g+w {c}/.git/config", "a group or other accounts may write {c}/.git/config"),
        ("chown 65534 {c}/.git/hooks", "uid 65534 owns it or a directory above it"),
        ("mv {c}/.git {p}/gitdir && echo gitdir: {p}/gitdir > {c}/.git",
         "{c}/.git is a link or names a git directory elsewhere"),
    ],
)  # fmt: skip
def test_root_runs_no_git_where_another_account_can_change_its_config(
    private_dir: Path, origin, faults: Any, attack: str, said: str
):
    """An attack on root through git: git runs programs a repository's config names (core.fsmonitor
    here); as root, RepoState runs no git at all in a checkout whose .git another account can
    change, and the plan refuses it (repo.writable) before the converge runs git there."""
    url, work = origin
    ref = git(work, "rev-parse", "HEAD")
    checkout = private_dir / "code"
    converge_repo(checkout, url, ref)
    marker = _plant_fsmonitor(checkout, private_dir)
    # The plant is real: set by root itself, git status runs it as root.
    git(checkout, "status", "--porcelain")
    assert marker.read_text().split() == ["0"]
    marker.unlink()

    sh(attack.format(c=checkout, p=private_dir))
    state = fact(RepoState, path=str(checkout), ref=ref)
    spec = normalise({"repos": {str(checkout): {"url": url, "ref": ref}}})
    [change] = repos_plan.plan(spec, lambda cls, **kw: fact(cls, **kw))
    with pytest.raises(OperationError, match="changeable by root alone"):
        converge_repo(checkout, url, ref)
    faults.plant(refused=change.refused, ran_as_root=marker.exists())
    assert not marker.exists(), "git ran the planted program as root"
    assert "head" not in state, state  # no git ran
    assert (change.id, change.refused) == ("repo.writable", True)
    assert said.format(c=checkout, p=private_dir) in change.actual
