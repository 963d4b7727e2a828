"""Root acts only on the path it checked, shown by races on this machine: another account
(uid 65534) flips a link in its own directory between one of root's places and its own, in a
tight loop, while root runs gpurig's real commands again and again (the import check, the
checkout's read, a file placed for an owner, a cleanup deletion). Not one run may execute the
account's code as uid 0, nor change, chown or delete one of root's files. Each race is bounded
in runs and in seconds; the static cases (the link in place before the run) are its first run."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from gpurig.deploys.cleanup import commands as cleanup_commands
from gpurig.deploys.repos import commands as repos_commands
from gpurig.deploys.writes import put
from gpurig.facts.gpurig_repo import EnvImports, RepoState
from gpurig.plans.change import Change

ALICE = 65534
RUNS = 40  # root's runs a race; each well under a second
BOUND_S = 20.0  # and the whole race within this
# Records the uid it ran as, beside itself (where its owner can write).
PLANT = "#!/bin/sh\nid -u >> {marker}\n"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
# A root whose git trusts every directory (`safe.directory=*`, as set where git's "dubious
# ownership" error was silenced): git's own owner check then stops nothing.
TRUSTING = {
    **os.environ,
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "safe.directory",
    "GIT_CONFIG_VALUE_0": "*",
}
ELF_CORE = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + b"\x04\x00" + b"\0" * 46

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the races are against root")


def as_alice(*argv: str) -> list[str]:
    return ["setpriv", f"--reuid={ALICE}", f"--regid={ALICE}", "--clear-groups", *argv]


# Alice's loops, until BOUND_S (and a margin) passes. LINKS: `$4` re-pointed between `$1`
# and `$2` (a rename over it, atomically). SWAP: `$4` is in turn her real directory `$2` and a
# link to `$1` (what a check that it is "a directory, not a link" sees, then what follows).
_UNTIL = f'end=$(( $(date +%s) + {int(BOUND_S) + 5} )); while [ "$(date +%s)" -lt "$end" ]; do '
LINKS = _UNTIL + 'for t in "$1" "$2"; do ln -sfn "$t" "$3" && mv -Tf "$3" "$4"; done; done'
SWAP = _UNTIL + 'rm -f "$4"; mv -T "$2" "$4"; mv -T "$4" "$2"; ln -sfn "$1" "$4"; done'


@contextmanager
def flipping(link: Path, first: Path, second: Path, loop: str = LINKS) -> Iterator[None]:
    """Alice changes what `link` leads to (`loop`) as fast as she can while the block runs."""
    new = link.with_name(f".{link.name}.new")
    flipper = subprocess.Popen(
        as_alice("sh", "-c", loop, "sh", str(first), str(second), str(new), str(link)),
        start_new_session=True,
    )
    try:
        yield
    finally:
        os.killpg(flipper.pid, signal.SIGKILL)
        flipper.wait()
        time.sleep(0.05)  # its last `ln` or `mv`, killed with it, gone


def race(run: Any) -> int:
    """Root's runs of `run` within the bounds: how many it made."""
    runs, start = 0, time.monotonic()
    while runs < RUNS and time.monotonic() - start < BOUND_S:
        run()
        runs += 1
    return runs


def sh(command: object, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", str(command)], capture_output=True, text=True, timeout=60, **kwargs
    )


@pytest.fixture
def places(private_dir: Path) -> dict[str, Path]:
    """Root's own place (root-only, as /root or /etc are) and alice's home beside it."""
    root, home = private_dir / "root", private_dir / "alice"
    root.mkdir(mode=0o700)
    home.mkdir()
    os.chown(home, ALICE, ALICE)
    return {"root": root, "home": home}


def _checkout(place: Path, owner: int, plant: str | None = None) -> Path:
    """A git checkout with an environment whose python is `plant` (or the system's)."""
    place.mkdir()
    subprocess.run(["git", "init", "-q", str(place)], check=True)
    (place / "train.py").write_text("print('train')\n")
    subprocess.run([*GIT, "-C", str(place), "add", "train.py"], check=True)
    subprocess.run([*GIT, "-C", str(place), "commit", "-qm", "first"], check=True)
    (place / ".venv" / "bin").mkdir(parents=True)
    python = place / ".venv" / "bin" / "python"
    if plant is None:
        python.symlink_to("/usr/bin/python3")
    else:
        python.write_text(plant)
        python.chmod(0o755)
        subprocess.run(["git", "-C", str(place), "config", "core.fsmonitor", str(python)])
    subprocess.run(["chown", "-hR", f"{owner}:{owner}", str(place)], check=True)
    return place


def _uids(marker: Path) -> set[str]:
    return set(marker.read_text().split()) if marker.exists() else set()


@pytest.mark.parametrize("read", ["imports", "checkout"])
def test_no_code_of_another_account_runs_as_root_however_she_flips(
    places: dict[str, Path], faults: Any, read: str
):
    """The import check runs the environment's python; the checkout's read runs git, which
    runs what the checkout's config names (core.fsmonitor). Alice's link `x` flips between
    root's checkout (all root's: root would run there) and her own, whose python and git
    hook record the uid they ran as."""
    home = places["home"]
    marker = home / "ran-as"
    mine = _checkout(home / "mine", ALICE, PLANT.format(marker=marker))
    roots = _checkout(places["root"] / "code", 0)
    link = home / "x"
    link.symlink_to(roots)
    os.lchown(link, ALICE, ALICE)
    if read == "imports":
        command = EnvImports().command(checkout=str(link), venv=f"{link}/.venv", modules=["json"])
    else:
        command = RepoState().command(path=str(link), ref="HEAD", venv=f"{link}/.venv")
    sh(command, env=TRUSTING)  # static: the link to root's checkout in place before the run
    with flipping(link, roots, mine):
        runs = race(lambda: sh(command, env=TRUSTING))
    ran = _uids(marker)
    faults.plant(refused="0" not in ran, ran_as_root="0" in ran)
    assert "0" not in ran, f"alice's code ran as root ({runs} runs)"
    assert runs >= 10


def _victim(place: Path, name: str, data: bytes) -> Path:
    victim = place / name
    victim.write_bytes(data)
    victim.chmod(0o600)
    return victim


def _unchanged(victim: Path, data: bytes) -> bool:
    found = victim.lstat()
    return (found.st_uid, found.st_mode & 0o777, victim.read_bytes()) == (0, 0o600, data)


@pytest.mark.parametrize("owner", ["nobody", None])
def test_a_file_placed_for_an_owner_never_lands_in_roots_directory(
    places: dict[str, Path], faults: Any, owner: str | None
):
    """`dest: ~alice/.kube/config`: alice's `.kube` flips between her own directory and a
    root-only one holding root's `config`. Root never writes, nor chowns, through her link:
    the file is placed by alice (her permissions resolve her link), or not at all."""
    home, root = places["home"], places["root"]
    victim = _victim(root, "config", b"root's own\n")
    own = home / "kube.d"
    own.mkdir()
    os.chown(own, ALICE, ALICE)
    link = home / ".kube"
    link.symlink_to(root)
    os.lchown(link, ALICE, ALICE)

    def place() -> None:
        first, upload, last = put(b"apiVersion: v1\n", f"{link}/config", "0600", owner=owner)
        assert sh(first).returncode == 0
        Path(upload.dest).write_bytes(b"apiVersion: v1\n")
        sh(last)

    place()  # static: her link to root's directory in place before the run
    static = _unchanged(victim, b"root's own\n") and sorted(os.listdir(root)) == ["config"]
    with flipping(link, root, own):
        runs = race(place)
    kept = _unchanged(victim, b"root's own\n") and sorted(os.listdir(root)) == ["config"]
    faults.plant(refused=static and kept, ran_as_root=not (static and kept))
    assert static, "root wrote through a link another account had placed"
    assert kept, f"root's file changed through her link ({runs} runs): {os.listdir(root)}"
    assert runs >= 10


def test_a_cleanup_never_deletes_through_a_link_another_account_flips(
    places: dict[str, Path], faults: Any
):
    """A declared core-file directory of alice's: `dumps` is in turn her real directory (with
    a core file the cleanup found) and a link to a root-only one holding root's `core.1`."""
    home, root = places["home"], places["root"]
    victim = _victim(root, "core.1", ELF_CORE)
    own, link = home / "dumps.d", home / "dumps"
    own.mkdir()
    os.chown(own, ALICE, ALICE)
    link.symlink_to(root)
    os.lchown(link, ALICE, ALICE)
    change = Change(
        "cleanup.core_files", "core files", "", "", "", data={"files": {f"{link}/core.1": 64}}
    )
    command = cleanup_commands(change)

    def clean() -> None:
        for where in (own, link):  # wherever her directory is now: a core file she left
            with contextlib.suppress(OSError):
                if not where.is_symlink():
                    (where / "core.1").write_bytes(ELF_CORE)
        sh(command)

    clean()
    static = victim.exists()
    with flipping(link, root, own, SWAP):
        runs = race(clean)
    kept = victim.exists() and _unchanged(victim, ELF_CORE)
    faults.plant(refused=static and kept, ran_as_root=not (static and kept))
    assert static and kept, f"root deleted its own file through her link ({runs} runs)"
    assert runs >= 10


def test_a_cleanup_still_removes_what_it_found_in_roots_own_place(places: dict[str, Path]):
    root = places["root"]
    (root / "core.7").write_bytes(ELF_CORE)
    (root / "core.8").write_bytes(b"not a core file")
    files = {f"{root}/core.7": 64, f"{root}/core.8": 15}
    change = Change("cleanup.core_files", "core files", "", "", "", data={"files": files})
    done = sh(cleanup_commands(change))
    assert done.returncode == 0 and "freed 2 core files" in done.stdout
    assert sorted(os.listdir(root)) == ["core.8"]


def test_a_file_placed_for_an_owner_is_hers_in_her_own_directory(places: dict[str, Path]):
    home = places["home"]
    first, upload, last = put(b"token\n", f"{home}/.kube/config", "0600", owner="nobody")
    assert sh(first).returncode == 0
    Path(upload.dest).write_bytes(b"token\n")
    done = sh(last)
    assert done.returncode == 0, done.stderr
    placed = (home / ".kube" / "config").stat()
    assert (placed.st_uid, placed.st_mode & 0o777) == (ALICE, 0o600)
    assert (home / ".kube").stat().st_uid == ALICE


def test_each_converge_command_in_a_checkout_walks_it_again(places: dict[str, Path]):
    """The read found root's checkout; by the converge's command, alice's link leads there:
    the command's own walk refuses before git runs."""
    home, marker = places["home"], places["home"] / "ran-as"
    roots = _checkout(places["root"] / "code", 0)
    mine = _checkout(home / "mine", ALICE, PLANT.format(marker=marker))
    link = home / "x"
    link.symlink_to(mine)
    change = Change("repo.crlf", "checkout", "", "", "", data={"path": str(link)})
    [command] = repos_commands(change)
    done = sh(command, env=TRUSTING)
    assert done.returncode == 1 and f"gpurig: {link}: uid {ALICE} can change it" in done.stderr
    assert _uids(marker) == set()
    change = Change("repo.crlf", "checkout", "", "", "", data={"path": str(roots)})
    [command] = repos_commands(change)
    assert sh(command, env=TRUSTING).returncode == 0


def test_a_cleanup_removes_core_files_in_a_sticky_directory_by_their_owners(
    places: dict[str, Path],
):
    """/tmp's own case: everyone may write it, but each entry is its owner's alone; root's
    core file goes by root's hand, alice's by hers."""
    sticky = places["root"].parent / "scratch"
    sticky.mkdir(mode=0o1777)
    sticky.chmod(0o1777)
    (sticky / "core.9").write_bytes(ELF_CORE)
    (sticky / "core.8").write_bytes(ELF_CORE)
    os.chown(sticky / "core.8", ALICE, ALICE)
    files = {f"{sticky}/core.9": 64, f"{sticky}/core.8": 64}
    change = Change("cleanup.core_files", "core files", "", "", "", data={"files": files})
    done = sh(cleanup_commands(change))
    assert done.returncode == 0 and "freed 2 core files" in done.stdout, done.stderr
    assert list(sticky.iterdir()) == []
