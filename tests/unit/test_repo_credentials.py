"""A repo URL's credential never reaches an argv (`ps` shows those to every account) or
.git/config (world-readable under root's umask): the converge's commands run for real here
against an HTTP server that demands it (git's dumb HTTP protocol), with every git argv logged."""

from __future__ import annotations

import base64
import http.server
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from gpurig.deploys import repos
from gpurig.deploys.writes import StagedUpload
from gpurig.plans import repos as repos_plan
from gpurig.plans.repos import split_credential
from gpurig.spec.model import normalise

TOKEN = "ghp_Zq8vN3kT5wR2yL7mP4xC9bH6jD1sF0gA2eUi"
GIT_ID = ["-c", "user.name=t", "-c", "user.email=t@t"]


class _Auth(http.server.SimpleHTTPRequestHandler):
    """Serves the directory only to `x-access-token:TOKEN` (basic auth), as a forge does."""

    def do_GET(self) -> None:
        wanted = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
        if self.headers.get("Authorization") != f"Basic {wanted}":
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="code"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, *args: object) -> None:
        pass


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *GIT_ID, *args], check=True,
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout.strip()


def _commit(work: Path, text: str) -> str:
    (work / "train.py").write_text(text)
    _git(work, "add", ".")
    _git(work, "commit", "-qm", text)
    _git(work, "push", "-q", "origin", "HEAD:main")
    _git(work.parent / "srv" / "code.git", "update-server-info")
    return _git(work, "rev-parse", "HEAD")


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(the URL with the token, an author's clone that pushes to it)."""
    bare, work = tmp_path / "srv" / "code.git", tmp_path / "author"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    subprocess.run(["git", "clone", "-q", str(bare), str(work)], check=True, capture_output=True)
    handler = partial(_Auth, directory=str(tmp_path / "srv"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://x-access-token:{TOKEN}@127.0.0.1:{server.server_port}/code.git", work
    server.shutdown()
    thread.join()


@pytest.fixture
def logged_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every git started through PATH writes its argv to the returned file first."""
    bin_dir, log = tmp_path / "bin", tmp_path / "git-argv.log"
    bin_dir.mkdir()
    real = shutil.which("git")
    (bin_dir / "git").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {real} "$@"\n')
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")  # a missing credential fails, never asks
    return log


def _converge(path: Path, url: str, ref: str) -> list[str]:
    """The checkout operation's commands for what the real fact finds, run here; the stage's
    upload is what pyinfra's SFTP does. Returns each command's text (its `sh -c` argv)."""
    spec = normalise({"repos": {str(path): {"url": url, "ref": ref, "line_endings": "keep"}}})

    def read(cls: type, **kwargs: object) -> object:
        instance = cls()
        out = subprocess.run(["sh", "-c", instance.command(**kwargs)], capture_output=True,
                             text=True, check=True).stdout.splitlines()  # fmt: skip
        return instance.process(out) if out else instance.default()

    changes = [c for c in repos_plan.plan(spec, read) if c.id != "packages.missing"]
    texts = []
    for change in changes:
        for command in repos.commands(change):
            if isinstance(command, StagedUpload):
                Path(command.dest).write_bytes(command.src.getvalue())
                continue
            text = str(command)
            texts.append(text)
            done = subprocess.run(["sh", "-c", text], capture_output=True, text=True)
            assert done.returncode == 0, f"{text}\n{done.stderr}"
    return texts


def _stages() -> set[str]:
    return {p.name for p in Path("/tmp").glob("gpurig-" + "?" * 32)}


def test_split_credential_keeps_what_is_not_one():
    plain = "https://github.com/org/code.git"
    assert split_credential(f"https://u:{TOKEN}@github.com/org/code.git") == (
        plain, f"https://u:{TOKEN}@github.com"
    )  # fmt: skip
    assert split_credential(f"https://{TOKEN}@github.com/org/code.git") == (
        plain, f"https://{TOKEN}:@github.com"
    )  # fmt: skip
    for url in (plain, "ssh://git@host/code.git", "git@host:code.git", "/srv/code.git"):
        assert split_credential(url) == (url, None)


def test_clone_and_fetch_take_the_credential_from_a_private_file(
    private_dir: Path, forge: tuple[str, Path], logged_git: Path
):
    url, work = forge
    first = _commit(work, "one")
    checkout = private_dir / "code"
    before = _stages()
    texts = _converge(checkout, url, first)
    assert _git(checkout, "rev-parse", "HEAD") == first
    second = _commit(work, "two")
    texts += _converge(checkout, url, second)  # a fetch: the ref is not in the checkout
    assert _git(checkout, "rev-parse", "HEAD") == second
    argv = logged_git.read_text()
    assert "fetch" in argv and "clone" in argv
    assert TOKEN not in argv and not any(TOKEN in text for text in texts)
    assert TOKEN not in (checkout / ".git" / "config").read_text()
    assert _git(checkout, "remote", "get-url", "origin") == split_credential(url)[0]
    assert _stages() == before  # each stage removed by the command that used it


def test_an_origin_holding_its_credential_loses_it(private_dir: Path, forge: tuple[str, Path]):
    url, work = forge
    ref = _commit(work, "one")
    checkout = private_dir / "code"
    subprocess.run(
        ["git", "clone", "-q", "-b", "main", url, str(checkout)], check=True
    )  # an older gpurig's
    texts = _converge(checkout, url, ref)
    [text] = texts
    assert text.endswith(f'git -C "$P" remote set-url origin {split_credential(url)[0]}')
    assert f"P=$(checked {checkout})" in text  # on the walked checkout
    assert TOKEN not in (checkout / ".git" / "config").read_text()
    assert _converge(checkout, url, ref) == []
