"""A git daemon on the sandbox bridge, so hosts clone and fetch over the network for real.
Tests push bare repositories into `<sandbox dir>/git/repos/NAME.git` and declare
`<url>/NAME.git` (the sandbox's own address and port)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from gpurig.sandbox.proc import SandboxError, run, spawn_daemon


def url(host: str, port: int) -> str:
    """The daemon's URL; repositories are `<url>/NAME.git`."""
    return f"git://{host}:{port}"


def start(top: Path, host: str, port: int) -> tuple[int, int | None]:
    """Serve every repository under `top/repos` read-only; returns pid and start time."""
    if not shutil.which("git"):
        raise SandboxError("git is not installed (apt-get install git)")
    repos = top / "repos"
    repos.mkdir(parents=True, exist_ok=True)
    # git-daemon --inetd per connection behind gpurig.sandbox.listen (see there why), which is
    # the process the sandbox records and later stops.
    daemon = Path(run(["git", "--exec-path"]).stdout.strip(), "git-daemon")
    argv = [sys.executable, "-m", "gpurig.sandbox.listen", host, str(port), "inetd",
            str(daemon), "--inetd", "--export-all", f"--base-path={repos}", str(repos)]  # fmt: skip
    return spawn_daemon(argv, top / "git-daemon.log", host, port)
