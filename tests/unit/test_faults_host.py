"""Hostile hosts, for real on this machine: names an unprivileged user can plant where the
cleanup looks (a newline and a tab forging another row, symlinks, look-alikes), and odd tool
output in one section of the one-round-trip read. Nothing outside the declared places is ever
removed, and one odd section spoils only its own concern."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpurig.checks.judge import drift_reads, evaluate
from gpurig.deploys import cleanup
from gpurig.facts.gpurig_cleanup import CoreFiles, EditableFinders
from gpurig.facts.gpurig_node import CgroupLeaks
from gpurig.facts.round_trip import HostState, Unreadable, read_key
from gpurig.plans import cleanup as cleanup_plan
from gpurig.spec.model import normalise

REPO_ROOT = Path(__file__).resolve().parents[2]
ELF_CORE = b"\x7fELF\x02\x01\x01" + b"\x00" * 9 + b"\x04\x00" + b"\x00" * 46


def run_fact(cls: type, **kwargs: Any) -> Any:
    fact = cls()
    out = subprocess.run(["sh", "-c", fact.command(**kwargs)], capture_output=True, text=True)
    lines = out.stdout.splitlines()
    return fact.process(lines) if lines else fact.default()


def victims(top: Path) -> dict[Path, bytes]:
    """Files of the user's that a forged row would point at, with their content."""
    files = {top / "victim" / "core": b"precious", top / "victim" / "notes": b"mine"}
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


def lost(files: dict[Path, bytes]) -> int:
    return sum(len(data) for path, data in files.items()
               if not path.exists() or path.read_bytes() != data)  # fmt: skip


@pytest.mark.parametrize(
    "name",
    [
        "core.1\n8\t..",  # a forged row: a name cannot hold "/", so it forges a relative path
        "core.2\n8\tcore",  # a forged row naming a look-alike
        "core.3\t8\tcore",  # a tab inside the name: one row too many fields
        "core.4\n\x1b[2Jcore",  # a terminal escape
        "core.5\n",  # a bare newline (this crashed the fact once)
    ],
)
def test_core_names_cannot_aim_the_cleanup_elsewhere(tmp_path: Path, faults: Any, name: str):
    work, files = tmp_path / "work", victims(tmp_path)
    work.mkdir()
    (work / "core").write_bytes(ELF_CORE)  # a real leftover, which must go
    planted = name
    (work / planted).write_bytes(ELF_CORE)
    (work / "core.77").symlink_to(tmp_path / "victim" / "core")  # a symlink to the user's file
    faults.injected += 2
    found = run_fact(CoreFiles, dirs=[str(work)])
    # A forged row can only name a plain file in the same directory; none exists here.
    assert str(work / "core") in found
    assert all(p == str(work / "core") or not Path(p).exists() for p in found)
    spec = normalise({"cleanup": {"core_files": True}})
    read = lambda cls, **kwargs: run_fact(cls, dirs=[str(work)])  # noqa: E731
    for change in cleanup_plan.plan(spec, read):
        subprocess.run(["sh", "-c", cleanup.commands(change)], check=True)
    faults.bytes_lost += lost(files)
    assert lost(files) == 0 and not (work / "core").exists()


def test_a_name_swapped_for_a_symlink_after_the_read_is_left_alone(tmp_path: Path, faults: Any):
    work, files = tmp_path / "work", victims(tmp_path)
    work.mkdir()
    (work / "core").write_bytes(ELF_CORE)
    found = run_fact(CoreFiles, dirs=[str(work)])
    (work / "core").unlink()
    (work / "core").symlink_to(tmp_path / "victim" / "core")  # the race: swapped meanwhile
    faults.injected += 1
    [change] = cleanup_plan.plan(
        normalise({"cleanup": {"core_files": True}}), lambda cls, **kw: found
    )
    subprocess.run(["sh", "-c", cleanup.commands(change)], check=True)
    faults.bytes_lost += lost(files)
    assert lost(files) == 0 and (work / "core").is_symlink()


def test_a_parent_swapped_for_a_symlink_is_left_alone(tmp_path: Path, faults: Any):
    work, files = tmp_path / "work", victims(tmp_path)
    work.mkdir()
    (work / "core").write_bytes(ELF_CORE)
    found = run_fact(CoreFiles, dirs=[str(work)])
    work.rename(tmp_path / "moved")
    work.symlink_to(tmp_path / "victim")  # the directory itself now points elsewhere
    faults.injected += 1
    [change] = cleanup_plan.plan(
        normalise({"cleanup": {"core_files": True}}), lambda cls, **kw: found
    )
    subprocess.run(["sh", "-c", cleanup.commands(change)], check=True)
    faults.bytes_lost += lost(files)
    assert lost(files) == 0


def test_editable_finder_names_cannot_forge_a_path_outside_the_venv(tmp_path: Path, faults: Any):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    stale = "MAPPING = {'x': '/nonexistent/gpurig'}\n"
    (site / "__editable___ok_finder.py").write_text(stale)  # a real stale finder: it goes
    for forged in ("__editable___x\n__editable___ok", "__editable___y\t..\t"):
        (site / f"{forged}_finder.py").write_text(stale)  # names forging rows and fields
    faults.injected += 2
    found = run_fact(EditableFinders, venvs=[str(tmp_path / "venv")])
    assert set(found) == {str(site / "__editable___ok_finder.py")}


def test_odd_output_in_one_section_spoils_only_its_concern(faults: Any):
    """A check's fact printing garbage (a host's broken /proc) is one `state.unreadable`; the
    other concerns of that host are still judged."""
    spec = normalise({"packages": ["sed", "gpurig-no-such-package"], "core_dumps": "disabled"})
    reads = drift_reads(spec)
    fact = HostState()
    command = fact.command(reads=reads)
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    index = next(i for i, (cls, _) in enumerate(reads) if cls is CgroupLeaks)
    start = lines.index(f"--gpurig-section-{lines[0].removeprefix('--gpurig-nonce ')} {index}")
    nonce = lines[start + 1].removeprefix("--gpurig-nonce ")  # the Sectioned fact's own
    at = lines.index(f"--gpurig-part-{nonce} proc_cgroups", start)
    lines[at + 1] = "memory [Unknown Error]" + "\x1b]8;;http://x\x07"
    faults.injected += 1
    values = fact.process(lines)
    key = read_key(CgroupLeaks, {})
    assert isinstance(values[key], Unreadable) and "/proc/cgroups" in str(values[key])
    findings = evaluate(spec, values)
    ids = [f.id for f in findings]
    assert "packages.missing" in ids and ids.count("state.unreadable") == 1
    assert not any(isinstance(v, Unreadable) for k, v in values.items() if k != key)


def test_no_secret_value_or_plain_digest_reaches_any_output(tmp_path: Path, faults: Any):
    """The secret's value and its unsalted sha256 appear in no command, fact output, change,
    finding or report; counted into the fault summary."""
    import hashlib

    from gpurig.plans import secrets as secrets_plan
    from gpurig.report.render import render
    from gpurig.spec.finding import HostReport

    value = "hf_0123456789abcdefSECRET"
    src, dest = tmp_path / "token", tmp_path / "dest"
    src.write_text(value)
    dest.write_text("an older token")
    spec = normalise({"secrets": [{"src": str(src), "dest": str(dest)}]})
    reads = drift_reads(spec)
    fact = HostState()
    command = fact.command(reads=reads)
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    values = fact.process(out.stdout.splitlines())
    changes = secrets_plan.plan(spec, lambda cls, **kw: values[read_key(cls, kw)])
    findings = evaluate(spec, values)
    report = HostReport("h", True, findings)
    texts = [command, out.stdout, out.stderr, repr(changes), repr(findings)]
    texts += [render([report], fmt) for fmt in ("table", "json", "junit", "markdown")]
    plain = hashlib.sha256(value.encode()).hexdigest()
    faults.secrets_seen += sum(value in t or plain in t for t in texts)
    assert [c.id for c in changes] == ["secret.content"]
    assert not any(value in t or plain in t for t in texts)


_VERBOSE_READ = """
import sys
import click
from pyinfra.api import Config, Inventory, State
from pyinfra.api.output import set_echo, set_formatter
from pyinfra_cli.cli import _set_verbosity
set_formatter(click.style)
set_echo(click.echo)  # as pyinfra's CLI: -vv and -vvv print commands and output through it
from gpurig.facts.round_trip import HostState
from gpurig.checks.judge import drift_reads
from gpurig.spec.inventory import load_spec_file
from gpurig.spec.model import normalise
import logging
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
inventory = Inventory((["@local"], {}))
state = _set_verbosity(State(inventory, Config()), 3)  # what `pyinfra -vvv` sets
host = inventory.get_host("@local")
host.connect()
spec = normalise({"secrets": [{"src": sys.argv[1], "dest": sys.argv[2]}]})
values = host.get_fact(HostState, reads=drift_reads(spec))
from gpurig.checks.judge import evaluate
print("FINDINGS", [f.id for f in evaluate(spec, values)])
"""


def test_a_vvv_log_lets_no_one_test_a_guess_of_the_secret(tmp_path: Path, faults: Any):
    """`-vv` printed the digest's salt with the fact command and `-vvv` the salted digest: one
    log confirmed a guess of a short secret. Read here through pyinfra with -vvv's settings
    (every command, every output, debug logging): no word of the log, as a salt or an HMAC key,
    turns the secret into a digest the log holds."""
    from tests.logguess import guesses_confirmed

    secret = b"1234"  # a PIN: four digits, 10k guesses
    src, dest = tmp_path / "pin", tmp_path / "dest"
    src.write_bytes(secret)
    dest.write_bytes(secret)  # the host's copy is current: its digest is in the output
    dest.chmod(0o600)
    proc = subprocess.run([sys.executable, "-c", _VERBOSE_READ, str(src), str(dest)],
                          capture_output=True, text=True, check=True, cwd=REPO_ROOT)  # fmt: skip
    log = proc.stdout + proc.stderr
    findings = next(line for line in log.splitlines() if line.startswith("FINDINGS"))
    assert "secret." not in findings  # the copy compared equal, through its keyed digest
    # The log is really that verbose: the command, and the host's answer (its public value).
    assert "/usr/bin/python3 -I -S -c" in log and re.search(r"public [0-9a-f]{400,}", log)
    faults.injected += 1
    confirmed = guesses_confirmed(log, secret)
    faults.secrets_seen += len(confirmed)
    assert confirmed == []
    # The same attack on a log of the old scheme (the salt on the command line, the salted
    # sha256 in the output) confirms the guess: this test failed before the exchange.
    salt = "0f4b6c2a9e1d83c75a60b2e4f91d7c3a"
    old = f"s={salt}\n0 {hashlib.sha256(salt.encode() + secret).hexdigest()} 600 root\n"
    assert guesses_confirmed(old, secret) == [salt]
