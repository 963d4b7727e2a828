"""The sandbox's git server under a fleet's worth of simultaneous clones: git-daemon alone
(backlog 5) reset some of 50; behind gpurig.sandbox.listen every one must succeed, and
upload-pack must still be able to wait for its own children (it cannot when SIGCHLD is
ignored: "possible repository corruption on the remote side")."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpurig.sandbox.proc import wait_port

pytestmark = pytest.mark.skipif(not shutil.which("git"), reason="needs git")
CLONES = 60


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def test_simultaneous_clones_all_succeed(tmp_path: Path) -> None:
    repos, work = tmp_path / "repos", tmp_path / "work"
    git("init", "-q", "--bare", "-b", "main", str(repos / "r.git"))
    git("init", "-q", "-b", "main", str(work))
    (work / "train.sh").write_text("echo training\n" * 200)
    git("-C", str(work), "add", "-A")
    git("-C", str(work), "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "c")
    git("-C", str(work), "push", "-q", str(repos / "r.git"), "HEAD:main")
    head = git("-C", str(work), "rev-parse", "HEAD").strip()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    daemon = Path(git("--exec-path").strip(), "git-daemon")
    server = subprocess.Popen(
        [sys.executable, "-m", "gpurig.sandbox.listen", "127.0.0.1", str(port), "inetd",
         str(daemon), "--inetd", "--export-all", f"--base-path={repos}", str(repos)],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert wait_port("127.0.0.1", port, timeout=10), "the git server did not answer"

        def clone(i: int) -> subprocess.CompletedProcess:
            dest = tmp_path / f"clone-{i}"
            url = f"git://127.0.0.1:{port}/r.git"
            return subprocess.run(["git", "clone", "-q", url, str(dest)], capture_output=True,
                                  text=True, check=False)  # fmt: skip

        with ThreadPoolExecutor(max_workers=CLONES) as pool:
            results = list(pool.map(clone, range(CLONES)))
    finally:
        server.kill()
        server.wait(timeout=10)
    failed = [r.stderr for r in results if r.returncode != 0]
    assert not failed, f"{len(failed)} of {CLONES} clones failed: {failed[0]}"
    heads = {
        git("-C", str(tmp_path / f"clone-{i}"), "rev-parse", "HEAD").strip() for i in range(CLONES)
    }
    assert heads == {head}
