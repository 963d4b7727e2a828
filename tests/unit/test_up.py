"""`gpurig up --local`, for real on this machine (scope: user, the login file in a temporary
HOME): it converges what its read finds, is a no-op the second time, prints only `export`
lines on stdout, and says in one line why the node cannot serve a job."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpurig.checks.compat import Finding
from gpurig.node.up import UpError, exports, reason, up
from gpurig.root_env import ROOT_PATH
from gpurig.spec.finding import HostReport
from gpurig.spec.inventory import load_spec_file
from gpurig.spec.model import normalise

ROOT = Path(__file__).resolve().parents[2]


def gpurig_up(home: Path, spec: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpurig", "up", "--local", "--spec", str(spec)],
        cwd=ROOT, env={**os.environ, "HOME": str(home)}, capture_output=True, text=True,
    )  # fmt: skip


def test_up_converges_then_is_a_noop(tmp_path: Path) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text("scope: user\ncore_dumps: disabled\n")
    first = gpurig_up(tmp_path, spec)
    assert first.returncode == 0, first.stderr
    assert first.stdout == ""  # no Podman socket declared: nothing to export
    assert "converging" in first.stderr and "core_dumps.profile" in first.stderr
    assert "ulimit -S -c 0" in (tmp_path / ".profile").read_text()
    again = gpurig_up(tmp_path, spec)
    assert again.returncode == 0, again.stderr
    assert again.stderr.strip().endswith("ready (already as declared)")
    assert "converging" not in again.stderr


def test_a_node_without_the_required_gpu_cannot_serve_the_job(tmp_path: Path) -> None:
    if subprocess.run(["sh", "-c", "command -v nvidia-smi"], capture_output=True).returncode == 0:
        pytest.skip("this machine has nvidia-smi: the missing GPU cannot be shown here")
    spec = tmp_path / "node.yaml"
    spec.write_text("scope: user\ncore_dumps: enabled\ngpu: required\n")
    done = gpurig_up(tmp_path, spec)
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("gpurig up: ") and "cannot serve this job: gpu.missing: " in line


DAMAGED = "# >>> gpurig core_dumps (written by gpurig: edits here are replaced) >>>\nexport A=1\n"


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        # A plan's refusal (a block without its end marker), in drift's words.
        ("scope: user\ncore_dumps: disabled\n",
         ["core_dumps.profile: ~/.profile: gpurig's core_dumps block differs from the spec, and "
          "the converge will not change it (expected a block with its end marker, got no end "
          "marker"]),
        # A command that failed (a clone of a repository that is not there): what is left, in
        # drift's words, and the command's own first line.
        ("scope: user\n"
         "repos:\n  {code}: {{url: 'file:///nonexistent/repo.git', ref: '{ref}'}}\n",
         ["repo.missing: checkout {code} differs from the spec",
          "; the converge failed: fatal: '/nonexistent/repo.git' does not appear to be a git "
          "repository"]),
    ],
    ids=["refused", "command-failed"],
)  # fmt: skip
def test_a_failed_converge_is_one_line_and_exit_1(tmp_path: Path, spec: str, said: list) -> None:
    """However the converge fails, the job sees one line on stderr (no traceback), exit 1."""
    code = tmp_path / "code"
    if "core_dumps" in spec:
        (tmp_path / ".profile").write_text(DAMAGED)
    path = tmp_path / "node.yaml"
    path.write_text(spec.format(code=code, ref="0123456789" * 4))
    done = gpurig_up(tmp_path, path)
    assert (done.returncode, done.stdout) == (1, "")
    [line] = done.stderr.splitlines()
    assert line.startswith("gpurig up: ") and " cannot serve this job: " in line
    for words in said:
        assert words.format(code=code) in line, line
    if "core_dumps" in spec:
        assert (tmp_path / ".profile").read_text() == DAMAGED


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text("scope: user\npackages: [tmux]\n")
    for argv in (["up", "--spec", str(spec)], ["up", "--local"], ["up", "--local", "--spec",
                                                                   str(spec)]):  # fmt: skip
        done = subprocess.run([sys.executable, "-m", "gpurig", *argv], cwd=ROOT,
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 2, done.stderr
    assert "packages: refused with scope: user" in done.stderr


def test_system_scope_needs_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text("core_dumps: disabled\n")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(UpError, match=r"scope: system .* needs root .* uid 1000"):
        up(load_spec_file(spec, "node"), print)


@pytest.mark.skipif(os.geteuid() != 0, reason="system scope runs as root")
def test_system_scope_resets_the_callers_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As root, the lock and the converge start nothing from the caller's PATH, BASH_ENV, ENV,
    HOME, git or runtime settings or working directory (another account may own them), as
    drift's read does."""
    planted, ran = tmp_path / "bin", tmp_path / "planted-sh-ran"
    planted.mkdir()
    (planted / "sh").write_text(f'#!/bin/sh\ntouch {ran}\nexec /bin/sh "$@"\n')
    (planted / "sh").chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o777)
    monkeypatch.setenv("PATH", f"{planted}:{os.environ['PATH']}")
    monkeypatch.setenv("BASH_ENV", str(tmp_path / "rc"))
    monkeypatch.setenv("ENV", str(tmp_path / "rc"))
    monkeypatch.setenv("HOME", str(home))
    # git's config, gpurig's runtime, sudo's caller, and what once ran or steered another
    # account's program as root (BROWSER through PYTHONWARNINGS, iconv's modules, apt's and
    # perl's and pip's and uv's configuration).
    callers = ("GIT_CONFIG_GLOBAL", "GIT_DIR", "XDG_CONFIG_HOME", "GPURIG_RUNTIME_DIR",
               "SUDO_UID", "BROWSER", "PYTHONWARNINGS", "GCONV_PATH", "APT_CONFIG", "PERL5OPT",
               "PIP_CONFIG_FILE", "UV_CONFIG_FILE", "SOMETHING_NEW")  # fmt: skip
    for name in callers:
        monkeypatch.setenv(name, str(tmp_path / "theirs"))
    monkeypatch.setenv("LC_ALL", "C.UTF-8")  # how to print passes
    monkeypatch.chdir(tmp_path)
    seen = {}

    def read_local(host: object, ahead: object = None) -> None:
        names = ("PATH", "BASH_ENV", "ENV", "HOME", "LC_ALL", *callers)
        seen.update({k: os.environ.get(k) for k in names})
        seen["cwd"] = os.getcwd()
        raise UpError("read")

    monkeypatch.setattr("gpurig.node.read.read_local", read_local)
    spec = tmp_path / "node.yaml"
    spec.write_text("core_dumps: disabled\n")
    with pytest.raises(UpError, match="read"):
        up(load_spec_file(spec, "node"), print)
    assert not ran.exists()  # the lock's sh was the system's
    assert seen == {"PATH": ROOT_PATH, "BASH_ENV": None, "ENV": None, "HOME": "/root", "cwd": "/",
                    "LC_ALL": "C.UTF-8", **dict.fromkeys(callers)}  # fmt: skip
    assert os.getcwd() == str(tmp_path) and os.environ["HOME"] == str(home)  # restored after


def test_exports_and_reason() -> None:
    assert exports(None) == []
    assert exports("/tmp/podman-run-1000/podman/podman.sock") == [
        "export DOCKER_HOST=unix:///tmp/podman-run-1000/podman/podman.sock",
        "export CONTAINER_HOST=unix:///tmp/podman-run-1000/podman/podman.sock",
    ]
    warn = Finding("shm.size", "warn", "small /dev/shm", "1 GiB", "0.1 GiB")
    error = Finding("gpu.count", "error", "fewer GPUs than declared", "2", "1")
    assert reason(HostReport("n", True, [warn])) is None
    assert reason(HostReport("n", True, [warn, error])) == (
        "gpu.count: fewer GPUs than declared (expected 2, got 1)"
    )
    assert normalise({"scope": "user", "engine": "podman"})["podman_socket"]


def test_up_as_an_inventory_host(tmp_path: Path) -> None:
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(
        "version: 1\nhosts:\n  runtime:\n    address: holy7c01\n    ssh: {user: me}\n"
        "    spec: {scope: user, core_dumps: disabled}\n"
    )
    argv = [sys.executable, "-m", "gpurig", "up", "--local", "--as"]
    env = {**os.environ, "HOME": str(tmp_path), "GPURIG_INVENTORY": str(inventory)}
    done = subprocess.run([*argv, "runtime"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "ulimit -S -c 0" in (tmp_path / ".profile").read_text()
    other = subprocess.run([*argv, "gpu-7", str(inventory)], cwd=ROOT, env=env,
                           capture_output=True, text=True)  # fmt: skip
    assert other.returncode == 2 and "no host named gpu-7" in other.stderr
