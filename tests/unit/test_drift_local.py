"""`gpurig drift --local` on this machine for real: the spec from a file or from an inventory
host, the same report and exit codes as `gpurig drift`, bad input refused with file:line."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpurig.cli.main import main
from gpurig.node.read import drift_local
from gpurig.remote.drift import run_drift
from gpurig.report.formats import FORMATS
from gpurig.report.render import render
from gpurig.spec.inventory import Host, SshSettings
from gpurig.spec.model import normalise

ROOT = Path(__file__).resolve().parents[2]
# dpkg is Essential on every Debian and Ubuntu host (the hosts gpurig converges).
INSTALLED = "dpkg"
ABSENT = "gpurig-test-no-such-package"
# `enabled` asks for none of gpurig's core-dump files, which a host not converged lacks.
MATCHING = f"core_dumps: enabled\npackages: [{INSTALLED}]\n"


def spec_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def drift(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["drift", *args])
    return result.exit_code, result.stdout, result.stderr


def test_spec_this_machine_matches_exits_0(tmp_path: Path) -> None:
    code, out, _ = drift("--local", "--spec", str(spec_file(tmp_path, MATCHING)))
    assert code == 0, out
    assert out.splitlines() == [f"{platform.node()}  ok", "1 host, 0 with drift"]


def test_drift_on_this_machine_is_found_and_exits_1(tmp_path: Path) -> None:
    spec = f"core_dumps: disabled\npackages: [{INSTALLED}, {ABSENT}]\n"
    code, out, _ = drift("--local", "--spec", str(spec_file(tmp_path, spec)), "--format", "json")
    assert code == 1
    [host] = json.loads(out)["hosts"]
    assert host["reachable"]
    ids = [f["id"] for f in host["findings"]]
    assert ids.count("core_dumps.file") == 3  # limits.d, profile.d, systemd's drop-in
    missing = [f for f in host["findings"] if f["id"] == "packages.missing"]
    assert [f["fix"] for f in missing] == [f"run the converge: it will install {ABSENT} with apt"]


def test_as_an_inventory_host_with_output_file(tmp_path: Path) -> None:
    """The host's merged spec: its group declares the package this machine lacks."""
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(
        "version: 1\n"
        f"groups:\n  gpu:\n    spec: {{packages: [{ABSENT}]}}\n"
        "hosts:\n"
        "  here:\n    address: 10.0.0.1\n    groups: [gpu]\n    spec: {core_dumps: enabled}\n"
        "  other:\n    address: 10.0.0.2\n"
    )
    out = tmp_path / "report.md"
    code, stdout, _ = drift(
        str(inventory), "--local", "--as", "here", "--format", "markdown", "--output", str(out)
    )
    assert (code, stdout) == (1, "")
    report = out.read_text()
    assert report.startswith("## gpurig drift: drift on 1 of 1 host\n")
    assert "here" in report and "packages.missing" in report and "other" not in report


def test_same_report_as_drift_over_a_connector(tmp_path: Path) -> None:
    """`drift --local` and `drift` give one report for one state: both read this machine (drift
    through pyinfra's @local connector, as its own test does) and render in every format."""
    spec = {"core_dumps": "disabled", "packages": [INSTALLED, ABSENT]}
    host = Host("@local", "localhost", SshSettings(), (), normalise(spec), "test", 1)
    local = drift_local(host)
    [remote] = run_drift([host], tmp_path)
    assert "packages.missing" in [f.id for f in local.findings]
    for fmt in FORMATS:
        assert render([local], fmt) == render([remote], fmt)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("core_dumps: maybe\n", ":1: core_dumps: expected one of disabled, enabled; got 'maybe'"),
        ("packages: [curl]\ncontainers:\n  train: {}\n", ":3: containers.train: no image;"),
        ("checks:\n  disk_free_min: 5\n", ":2: checks.disk_free_min: expected"),
        ("engine: none\nengine: docker\n", ":2: engine: duplicate key 'engine'"),
        ("- engine\n", ":1: expected a mapping; got a list"),
        ("hosts: {}\n", ":1: hosts: unknown key 'hosts'"),
    ],
    ids=["enum", "no-image", "size", "duplicate", "not-a-mapping", "an-inventory"],
)
def test_malformed_spec_file_exits_2_with_file_line_key(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = spec_file(tmp_path, text)
    code, out, err = drift("--local", "--spec", str(path))
    assert (code, out) == (2, "")
    assert f"{path}{expected}" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--local"], "one of --as NAME (with INVENTORY) or --spec FILE"),
        (["--local", "--as", "here"], "--as NAME needs the INVENTORY"),
        (["--local", "--spec", "s.yaml", "--as", "here", "i.yaml"], "one of --as NAME"),
        (["--local", "--spec", "s.yaml", "i.yaml"], "--spec FILE replaces INVENTORY"),
        (["--local", "--as", "here", "--limit", "here", "i.yaml"], "not --limit"),
        (["--as", "here", "i.yaml"], "--as and --spec go with --local"),
        ([], "missing argument INVENTORY"),
    ],
)
def test_option_combinations_that_say_two_things_exit_2(args: list[str], message: str) -> None:
    code, out, err = drift(*args)
    assert (code, out) == (2, "")
    assert message in err


def test_unknown_as_name_exits_2(tmp_path: Path) -> None:
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text("version: 1\nhosts:\n  here:\n    address: 10.0.0.1\n")
    code, _, err = drift(str(inventory), "--local", "--as", "there")
    assert code == 2
    assert "no host named there" in err


def _as_nobody(python: str, *args: str) -> subprocess.CompletedProcess[str]:
    site = sysconfig.get_paths()["purelib"]
    command = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", python]
    return subprocess.run(
        [*command, "-m", "gpurig", *args],
        cwd="/",
        env={"PATH": os.environ["PATH"], "HOME": "/", "PYTHONPATH": f"{ROOT}:{site}"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _interpreter_for_nobody() -> str | None:
    """This interpreter, or the system's of the same version, where `nobody` may run it."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for python in (sys.executable, shutil.which(version, path="/usr/local/bin:/usr/bin")):
        if python and _as_nobody(python, "--version").returncode == 0:
            return python
    return None


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None or shutil.which("sudo") is not None,
    reason="needs root to become `nobody` (setpriv), and no sudo for nobody to try",
)
def test_a_user_without_root_reads_as_itself_with_a_warning() -> None:
    """No sudo to use: the reads run as the user, what it can read is judged, and the report
    says what it could not see; a warning alone exits 0."""
    python = _interpreter_for_nobody()
    if python is None:
        pytest.skip("no interpreter here that `nobody` may run")
    with tempfile.TemporaryDirectory() as shared:  # pytest's tmp_path is root's alone
        path = spec_file(Path(shared), MATCHING)
        os.chmod(shared, 0o755)
        path.chmod(0o644)
        done = _as_nobody(python, "drift", "--local", "--spec", str(path), "--format", "json")
    assert done.returncode == 0, done.stderr
    [host] = json.loads(done.stdout)["hosts"]
    [warning] = host["findings"]
    assert (warning["id"], warning["severity"]) == ("host.not_root", "warn")
    assert warning["actual"] == "nobody without passwordless sudo"
