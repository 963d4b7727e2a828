"""The import check (facts.gpurig_repo.EnvImports, facts/env_imports.sh) never runs another
account's code as root (issue: a `json.py` planted in a checkout ran as uid 0 from
`cd checkout && python -c ...`). Run for real on this machine: a real interpreter, real files
owned by real other uids, the fact's command as root."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from gpurig.checks import node as node_checks
from gpurig.facts.gpurig_repo import EnvImports
from gpurig.spec.model import normalise
from tests.unit.fact_values import reader, run_here

NOBODY, OTHER = 65534, 65533  # uids that own nothing on a Debian machine
# A module the import check's own script imports after start-up: from the checkout, it runs.
PLANTED = "import os\nopen(os.path.join(os.path.dirname(__file__), 'ran-as'), 'w')" \
    ".write(str(os.getuid()))\nfrom importlib import import_module\n" \
    "globals().update(vars(import_module('_json')))\n"  # fmt: skip

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the attack is on root: needs root to own files as other uids"
)


def environment(place: Path, checkout_uid: int, venv_uid: int, mode: int = 0o755) -> Path:
    """A checkout with a planted json.py, and an environment whose python is the system's
    (one another account can run: an account resolves its own paths as itself)."""
    checkout, venv = place / "code", place / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to("/usr/bin/python3")
    checkout.mkdir()
    (checkout / "json.py").write_text(PLANTED)
    for path, uid in ((checkout, checkout_uid), (checkout / "json.py", checkout_uid)):
        os.chown(path, uid, uid)
    os.chown(venv, venv_uid, venv_uid)
    checkout.chmod(mode)
    return checkout


def check_imports(checkout: Path) -> dict:
    venv = str(checkout.parent / "venv")
    return run_here(EnvImports, checkout=str(checkout), venv=venv, modules=["yaml"])


def ran_as(checkout: Path) -> str | None:
    marker = checkout / "ran-as"
    return marker.read_text() if marker.exists() else None


def test_a_checkout_owned_by_another_account_runs_as_that_account(private_dir: Path) -> None:
    checkout = environment(private_dir, NOBODY, 0)
    entry = check_imports(checkout)
    assert entry["run_as"] == NOBODY and entry["refused"] is None
    assert ran_as(checkout) == str(NOBODY)  # the planted module ran, as its owner: never root


@pytest.mark.parametrize(
    ("checkout_uid", "venv_uid", "mode", "why"),
    [
        (0, 0, 0o777, "other accounts may write"),
        (0, 0, 0o775, "other accounts may write"),
        (NOBODY, OTHER, 0o755, "owned by several accounts"),
    ],
)
def test_a_checkout_others_can_change_is_not_run_at_all(
    private_dir: Path, checkout_uid: int, venv_uid: int, mode: int, why: str
) -> None:
    checkout = environment(private_dir, checkout_uid, venv_uid, mode)
    entry = check_imports(checkout)
    assert entry["refused"] and why in entry["refused"], entry
    assert entry["report"] is None and entry["run_as"] is None
    assert ran_as(checkout) is None
    spec = normalise(
        {"engine": "none", "repos": {str(checkout): {
            "url": "https://example.org/c.git", "ref": "b" * 40,
            "python": {"lockfile": "uv.lock", "venv": str(checkout.parent / "venv"),
                       "imports": ["yaml"]}}}}
    )  # fmt: skip
    read = reader({EnvImports: {str(checkout): entry}})
    [finding] = [f for rule in node_checks.IMPORTS for f in rule(spec, read)]
    assert finding.id == "env.imports_unchecked" and finding.severity == "warn"
    assert why in finding.actual


def test_a_checkout_under_a_shared_directory_is_refused(private_dir: Path) -> None:
    """A directory a group may write: anyone in it could have made or swapped the checkout."""
    shared = private_dir / "shared"
    shared.mkdir()
    shared.chmod(0o775)
    checkout = environment(shared, 0, 0)
    entry = check_imports(checkout)
    assert entry["refused"] == f"a group or other accounts may write {shared}"
    assert not entry["ran"] and ran_as(checkout) is None


def test_a_root_checkout_in_a_sticky_directory_is_roots(tmp_path: Path) -> None:
    """pytest's tmp_path lies under /tmp (mode 1777) in root's own entry: no one else can
    move or replace it, so it is root's alone and runs as root."""
    checkout = environment(tmp_path, 0, 0)
    entry = check_imports(checkout)
    assert entry["refused"] is None and entry["run_as"] is None and entry["ran"]


def _base_version() -> str:
    said = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(*sys.version_info[:2], "
                           "sep='.')"], capture_output=True, text=True, check=True)  # fmt: skip
    return said.stdout.strip()


def test_a_pth_another_account_planted_in_roots_environment_never_runs_as_root(
    private_dir: Path,
) -> None:
    """Root's checkout, root's environment and its python, but a site-packages of another
    account's inside it: her .pth ran as uid 0 at the python's start. The walk covers the
    environment's whole tree: such an environment's python is not run as root at all."""
    checkout = environment(private_dir, 0, 0)
    venv = private_dir / "venv"
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    (venv / ".lock").write_text("")  # uv's, mode 0666: nothing python loads, so no refusal
    (venv / ".lock").chmod(0o666)
    site = venv / "lib" / f"python{_base_version()}" / "site-packages"
    site.mkdir(parents=True)
    marker = private_dir / "pth-ran-as"
    (site / "planted.pth").write_text(
        f"import os; open({str(marker)!r}, 'w').write(str(os.getuid()))\n"
    )
    os.chown(site, NOBODY, NOBODY)
    os.chown(site / "planted.pth", NOBODY, NOBODY)
    entry = check_imports(checkout)
    assert not marker.exists(), f"the planted .pth ran as uid {marker.read_text()}"
    assert entry["refused"] == f"{site}, which root's python would load, is not root's alone"
    assert not entry["ran"] and entry["run_as"] is None


def test_the_callers_python_variables_reach_no_python_root_runs(
    private_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PYTHONWARNINGS naming a module (antigravity) made the environment's python import it at
    start-up, which ran the caller's BROWSER as uid 0."""
    checkout = environment(private_dir, 0, 0)
    (checkout / "json.py").unlink()
    marker = private_dir / "browser-ran-as"
    monkeypatch.setenv("PYTHONWARNINGS", "all:0:antigravity.x:0:0")
    monkeypatch.setenv("BROWSER", f'/bin/sh -c "id -u > {marker}" %s')
    entry = check_imports(checkout)
    assert entry["ran"] and entry["refused"] is None, entry
    time.sleep(0.5)  # the browser is started in the background
    assert not marker.exists(), f"the caller's BROWSER ran as uid {marker.read_text()}"


def test_a_file_python_does_not_load_is_no_reason_to_refuse(private_dir: Path) -> None:
    """uv leaves a world-writable `.lock` in the environments it makes: python never loads it,
    so root's own environment is still checked."""
    checkout = environment(private_dir, 0, 0)
    (checkout / "json.py").unlink()
    lock = private_dir / "venv" / ".lock"
    lock.write_text("")
    lock.chmod(0o666)
    entry = check_imports(checkout)
    assert entry["ran"] and entry["refused"] is None, entry
