"""The walk root acts by (gpurig/safe_path.py and its shell twin facts/safe_path.sh), on real
trees of several accounts: a link is trusted only where the directory holding it is root's
alone, and the two walks give the same verdict on every tree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpurig.safe_path import Walk, walk

SAFE_PATH = Path(__file__).parents[2] / "facts" / "safe_path.sh"
ALICE, BOB = 65534, 65533

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the trees belong to other accounts")


def shell_walk(path: str) -> Walk:
    script = (
        f'. {SAFE_PATH}\nwalk "$1"; rc=$?\n'
        'printf "%s\\n" "$CHECKED" "$HELD" "$OWNER" "$REFUSED"\nexit $rc'
    )
    done = subprocess.run(
        ["sh", "-c", script, "sh", path], capture_output=True, text=True, check=False
    )
    checked, held, owner, refused = done.stdout.split("\n")[:4]
    assert done.returncode == (1 if refused else 0), done
    return Walk(checked, held, int(owner) if owner else None, refused or None)


def tree(top: Path) -> dict[str, Path]:
    """Root's checkout, alice's home with links into root's places, a sticky directory, a
    group-writable one, bob's directory inside alice's, and a loop."""
    places = {
        "root": top / "srv" / "code",
        "alice": top / "home" / "alice",
        "sticky": top / "scratch",
        "shared": top / "shared",
    }
    for place in places.values():
        place.mkdir(parents=True)
    (places["root"] / ".venv" / "bin").mkdir(parents=True)
    python = places["root"] / ".venv" / "bin" / "python"
    python.symlink_to("/usr/bin/python3")
    (places["root"] / "run.sh").write_text("#!/bin/sh\n")
    os.chown(places["alice"], ALICE, ALICE)
    (places["alice"] / "code").symlink_to(places["root"])
    (places["alice"] / "kube").symlink_to(top / "srv")
    os.lchown(places["alice"] / "code", ALICE, ALICE)
    (places["alice"] / "bob").mkdir()
    os.chown(places["alice"] / "bob", BOB, BOB)
    (places["alice"] / "mine").mkdir()
    os.chown(places["alice"] / "mine", ALICE, ALICE)
    places["sticky"].chmod(0o1777)
    (places["sticky"] / "roots").mkdir()
    (places["sticky"] / "theirs").mkdir()
    os.chown(places["sticky"] / "theirs", ALICE, ALICE)
    (places["sticky"] / "link").symlink_to(places["root"])
    os.lchown(places["sticky"] / "link", ALICE, ALICE)
    (places["sticky"] / "rootlink").symlink_to(places["root"])
    places["shared"].chmod(0o775)
    (top / "srv" / "tocode").symlink_to("code")
    (top / "srv" / "up").symlink_to("../srv/code/.venv")
    (top / "srv" / "loop").symlink_to("loop")
    (top / "srv" / "w").write_text("")
    (top / "srv" / "w").chmod(0o666)
    return places


CASES = [
    # path under the tree, (checked, owner, refusal)
    ("srv/code", ("srv/code", None, None)),
    ("srv/tocode/run.sh", ("srv/code/run.sh", None, None)),
    ("srv/up/bin/python", ("/usr/bin/python3.11", None, None)),
    ("srv/code/missing/deeper", ("srv/code/missing/deeper", None, None)),
    # a link of alice's to root's checkout: alice can re-point it, so she owns the result
    ("home/alice/code", ("srv/code", ALICE, None)),
    ("home/alice/code/.venv/bin/python", ("/usr/bin/python3.11", ALICE, None)),
    ("home/alice/kube/config", ("srv/config", ALICE, None)),
    ("home/alice/mine/f", ("home/alice/mine/f", ALICE, None)),
    ("home/alice/bob", (None, ALICE, "several accounts (uids 65534 and 65533) can change")),
    ("scratch", (None, None, "other accounts may write")),
    ("scratch/roots", ("scratch/roots", None, None)),
    ("scratch/theirs/x", ("scratch/theirs/x", ALICE, None)),
    ("scratch/link", ("srv/code", ALICE, None)),
    ("scratch/rootlink/run.sh", ("srv/code/run.sh", None, None)),
    ("scratch/new", (None, None, "other accounts may write")),
    ("shared/x", (None, None, "a group or other accounts may write")),
    ("srv/loop", (None, None, "more than 40 links")),
    ("srv/w", (None, None, "a group or other accounts may write")),
    ("srv/code/run.sh/x", (None, None, "is not a directory")),
]


@pytest.mark.parametrize(("where", "expected"), CASES, ids=[c[0] for c in CASES])
def test_both_walks_give_the_verdict_each_tree_deserves(
    private_dir: Path, where: str, expected: tuple[str | None, int | None, str | None]
):
    tree(private_dir)
    path = f"{private_dir}/{where}"
    found = walk(path)
    assert shell_walk(path) == found
    checked, owner, refusal = expected
    assert found.owner == owner
    if refusal is None:
        assert found.refused is None and found.root_only == (owner is None)
        assert found.checked == (checked if checked.startswith("/") else f"{private_dir}/{checked}")
    else:
        assert found.refused is not None and refusal in found.refused
        assert not found.root_only


def test_a_venv_python_is_held_by_its_own_name(private_dir: Path):
    """Run by its resolved target, a venv's python would not find its environment: `held`
    keeps the last link, in a directory root alone can change."""
    tree(private_dir)
    found = walk(f"{private_dir}/srv/tocode/.venv/bin/python")
    assert found.held == f"{private_dir}/srv/code/.venv/bin/python" and found.root_only
    assert shell_walk(f"{private_dir}/srv/tocode/.venv/bin/python") == found
