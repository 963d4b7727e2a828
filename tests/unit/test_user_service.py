"""The user's supervised Podman service, for real in a shell: the fact that reads it and the
converge's commands that start and stop it, run as an unprivileged user with a stand-in
`podman` on PATH (a tiny HTTP server on the unix socket it is given, answering `_ping`).
Started idempotently: the pid file and the socket checked, a stale socket replaced, never a
second service."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpurig.deploys.engine import USER_START
from gpurig.facts.gpurig_cleanup import CoreFiles
from gpurig.facts.gpurig_user import Commands, UserCoreFiles, UserPodman
from gpurig.node.lock import hold_command, not_own
from gpurig.plans.change import findings
from gpurig.plans.engine import plan as engine_plan
from gpurig.report.render import one_line
from gpurig.spec.model import normalise

# `podman system service --time=0 unix://PATH`: serve _ping on PATH until killed. Run by the
# system's python3: the user may not reach the test's own interpreter.
FAKE_PODMAN = """#!/usr/bin/python3
import http.server, socketserver, sys
assert sys.argv[1:4] == ["system", "service", "--time=0"], sys.argv
class Ping(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"OK" if self.path.endswith("/_ping") else b"?"
        self.send_response(200); self.end_headers(); self.wfile.write(body)
    def log_message(self, *args):
        pass
class Server(socketserver.UnixStreamServer):
    def get_request(self):
        request, _ = super().get_request()
        return request, ("local", 0)
Server(sys.argv[4][len("unix://"):], Ping).serve_forever()
"""

NOBODY = 65534


@pytest.fixture
def shell() -> Iterator[tuple[object, Path]]:
    """Run sh scripts as an unprivileged user (nobody, when the tests run as root) with the
    stand-in podman first on PATH; yields (run, the user's supervised directory)."""
    if not shutil.which("curl") or not shutil.which("setpriv"):
        pytest.fail("these tests need curl and setpriv (util-linux) on this machine")
    # Not under pytest's tmp_path (0700, root's): the user must reach the stand-in.
    tmp_path = Path(tempfile.mkdtemp(prefix="gpurig-user-service-"))
    tmp_path.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "podman").write_text(FAKE_PODMAN)
    (bin_dir / "podman").chmod(0o755)
    uid = NOBODY if os.geteuid() == 0 else os.geteuid()
    prefix = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    prefix = prefix if os.geteuid() == 0 else []
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "LC_ALL": "C"}

    def run(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*prefix, "sh", "-c", script], env=env, capture_output=True, text=True, timeout=60
        )

    found = run("command -v podman").stdout.strip()
    assert found == str(bin_dir / "podman"), f"the user runs {found}, not the stand-in"
    supervised = Path(f"/tmp/podman-run-{uid}")
    run(f"rm -rf {supervised}")
    yield run, supervised
    run(USER_START["stop"])
    run(f"rm -rf {supervised}")
    shutil.rmtree(tmp_path)


def read(run: object, fact: UserPodman | Commands, **kwargs: object) -> dict:
    done = run(fact.command(**kwargs))  # type: ignore[operator]
    assert done.returncode == 0, done.stderr
    return fact.process([line for line in done.stdout.splitlines() if line])


def service_processes(supervised: Path) -> list[str]:
    out = subprocess.run(["pgrep", "-f", f"service --time=0 unix://{supervised}"],
                         capture_output=True, text=True)  # fmt: skip
    return out.stdout.split()


def test_start_stale_socket_and_never_a_second_service(shell) -> None:
    run, supervised = shell
    before = read(run, UserPodman())
    assert (before["service"], before["answers"], before["socket"]) == (None, False, "missing")
    assert before["runtime_dir"] == str(supervised) and before["linger"] is False

    started = run(USER_START["supervised"])
    assert started.returncode == 0, started.stderr
    up = read(run, UserPodman())
    assert up["answers"] and up["service"] and up["supervised_dir"] == up["uid"]
    assert service_processes(supervised) == [str(up["service"])]

    # The service dies (a job ended): its pid file stays, its socket is stale.
    run(f"kill {up['service']}; sleep 0.5")
    stale = read(run, UserPodman())
    assert (stale["service"], stale["answers"], stale["socket"]) == (None, False, "socket")
    again = run(USER_START["supervised"])
    assert again.returncode == 0, again.stderr
    assert read(run, UserPodman())["answers"]

    # Started again while one runs (a converge that raced a job's): still one service.
    third = run(USER_START["supervised"])
    assert third.returncode == 0, third.stderr
    assert len(service_processes(supervised)) == 1

    stopped = run(USER_START["stop"])
    assert stopped.returncode == 0 and service_processes(supervised) == []
    assert read(run, UserPodman())["service"] is None


def test_a_directory_of_another_account_is_left_alone(shell) -> None:
    run, supervised = shell
    if os.geteuid() != 0:
        pytest.skip("needs root to make a directory of another account")
    supervised.mkdir(mode=0o700)  # root's, as another user's would be
    try:
        refused = run(USER_START["supervised"])
        assert refused.returncode == 1
        assert (
            refused.stderr.strip()
            == f"gpurig: {supervised} is not this user's directory; left alone"
        )
        assert read(run, UserPodman())["supervised_dir"] == 0
    finally:
        supervised.rmdir()


def test_the_lock_in_a_directory_of_another_account_says_what_drift_says(shell) -> None:
    """The converge's lock and `up --local` met another account's runtime directory and said
    `exit 1, said ''` (field note): they name it, and its owner, in drift's own words."""
    run, supervised = shell
    if os.geteuid() != 0:
        pytest.skip("needs root to make a directory of another account")
    supervised.mkdir(mode=0o755)  # root's, as another user's would be
    try:
        spec = normalise({"scope": "user", "engine": "podman"})
        held = run(hold_command(spec, sudo=False))
        assert held.returncode == 1, held.stderr
        said = not_own(held.stdout.strip())

        def host(cls: type, **kwargs: object) -> object:  # drift's reads of the same node
            return read(run, cls(), **kwargs) if cls in (UserPodman, Commands) else cls().default()

        [drift] = [f for f in findings(engine_plan(spec, host)) if f.id == "engine.user_service"]
        assert said == one_line(drift)
        assert f"{supervised}: a directory of " in said and "found a directory of uid 0" in said
    finally:
        supervised.rmdir()


def test_commands_reports_each_tool() -> None:
    fact = Commands()
    command = fact.command(names=["sh", "no-such-tool-gpurig"])
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    assert fact.process(out.stdout.splitlines()) == {"sh": True, "no-such-tool-gpurig": False}
    with pytest.raises(ValueError):
        fact.command(names=["sh; rm -rf /"])
    with pytest.raises(ValueError):
        fact.process(["7 yes"])


def test_odd_user_podman_output_is_refused() -> None:
    fact = UserPodman()
    good = ["uid=1000", "user=alice", "linger=no", "runtime_dir=/tmp/podman-run-1000",
            "socket=missing", "answers=no"]  # fmt: skip
    assert fact.process(good)["uid"] == 1000
    for odd in ("service=12; rm", "runtime_dir=relative", "answers=maybe", "extra=1"):
        with pytest.raises(ValueError):
            fact.process([*good, odd])
    with pytest.raises(ValueError, match="no answers"):
        fact.process(good[:-1])


def test_a_users_leftovers_are_its_own(shell) -> None:
    """In a place every user writes (/tmp), a user's cleanup sees only its own core files."""
    run, _ = shell
    if os.geteuid() != 0:
        pytest.skip("needs root to make another account's file")
    shared = Path(tempfile.mkdtemp(prefix="gpurig-shared-"))
    shared.chmod(0o1777)
    elf_core = b"\x7fELF\x02\x01\x01" + b"\x00" * 9 + b"\x04\x00"
    try:
        (shared / "core.1").write_bytes(elf_core)  # root's
        made = run(f"printf '\\177ELF\\002\\001\\001\\000\\000\\000\\000\\000\\000\\000\\000\\000"
                   f"\\004\\000' > {shared}/core.2")  # fmt: skip
        assert made.returncode == 0, made.stderr
        mine = UserCoreFiles()
        done = run(mine.command(dirs=[str(shared)]))
        assert mine.process(done.stdout.splitlines()) == {f"{shared}/core.2": len(elf_core)}
        every = CoreFiles()
        out = subprocess.run(["sh", "-c", every.command(dirs=[str(shared)])],
                             capture_output=True, text=True)  # fmt: skip
        assert set(every.process(out.stdout.splitlines())) == {f"{shared}/core.1",
                                                               f"{shared}/core.2"}  # fmt: skip
    finally:
        shutil.rmtree(shared)
