"""The node agent on the release matrix's Debian 11 and 13 hosts, under their own python3 (3.9,
3.13): on Debian 11 the wheelhouse built here for that Python, the README's node commands run as
written (a venv made with the host's python3, filled offline), then the node contracts (npd,
prolog, healthcheck) against the host's real state, clean and with a package removed by hand.
Their findings are the ones drift over SSH (this machine's Python) reports for the same host
and spec; what needs the full install (`up --local`) refuses, naming its floor. Then, on both
releases, the same from the one offline artifact (scripts/node_deb.sh): installed with dpkg,
run through its wrappers and NPD config on the hand-made FAULTS, removed without a trace.
test_slurm.py makes the same FAULTS on a Debian 12 node and finds the same ids there, with the
normal install and over SSH; its SLURM drains and resumes a node through the .deb's wrappers.
Each release's hosts are started once for this module's tests and the release matrix's
(test_releases.py), and removed after."""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support import RELEASE_FULL, REPO_ROOT, ReleaseHosts, Sandbox, finding_ids, gpurig, remote
from test_node_install import readme_steps
from testinfra.host import Host

from gpurig.data.tables import table
from gpurig.node.floor import FULL_PYTHON
from gpurig.plans.core_dumps import MANAGED_FILES
from gpurig.sandbox.rootfs import RELEASES, host_name

WORK = "/root/gpurig-node-py39"
SPEC = "/etc/gpurig/node.yaml"
# Configuration drift drains here (its default is to report: the converge fixes it), so the
# Prolog's refusal is part of what each hand-made fault shows.
NODE_SPEC = {"engine": "none", "gpu": "absent", "core_dumps": "disabled",
             "packages": ["curl", "tmux"],
             "checks": {"disk_free_min": "1m", "inodes_free_min_pct": 1},
             "node_contracts": {"actions": {"packages.missing": "drain",
                                            "core_dumps.*": "drain"}}}  # fmt: skip
CORE_LIMITS = "/etc/security/limits.d/90-gpurig-core.conf"  # one of core_dumps' files
# Faults made by hand, one after another on a host that matches NODE_SPEC: each command (as
# root on the node) and the error ids every release's node agent, and drift over SSH, then
# find. test_slurm.py makes them on a Debian 12 node.
FAULTS = (
    ("DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq tmux >/dev/null", {"packages.missing"}),
    (f"rm {CORE_LIMITS}", {"packages.missing", "core_dumps.file"}),
)


@pytest.fixture(scope="module")
def release_host(request: pytest.FixtureRequest, release_hosts: ReleaseHosts) -> Iterator[str]:
    """A full host of the release `request.param` that nothing converges (the release matrix
    converges its others: the hosts are shared, conftest.py)."""
    suite = request.param
    release_hosts.hold(suite)
    try:
        yield host_name("full", str(RELEASE_FULL), suite)
    finally:
        release_hosts.done(suite, __name__)


def contract(shell: Host, mode: str) -> tuple[int, str]:
    """A node contract's exit status and what it said, run from / with a batch job's bare
    environment (the README's link puts gpurig on its PATH)."""
    run = shell.run(f"cd / && env -i PATH=/usr/local/bin:/usr/bin:/bin gpurig drift --local "
                    f"--spec {SPEC} --mode {mode}")  # fmt: skip
    return run.rc, run.stdout + run.stderr


def judged_here(shell: Host, spec: str = SPEC) -> tuple[int, set[str]]:
    """`drift --local`'s exit status and error ids on the node, from its JSON."""
    run = shell.run(f"gpurig drift --local --spec {spec} --format json")
    [report] = json.loads(run.stdout)["hosts"]
    return run.rc, finding_ids([f for f in report["findings"] if f["severity"] == "error"])


def over_ssh(box: Sandbox, host: str, tmp: Path) -> set[str]:
    """The error ids drift over SSH (this machine's Python) reports for the host and spec."""
    inventory = yaml.safe_load(box.paths.inventory.read_text())
    inventory["hosts"] = {host: {**inventory["hosts"][host], "spec": NODE_SPEC}}
    path = tmp / "py39.yaml"
    path.write_text(yaml.safe_dump(inventory))
    proc = gpurig("drift", str(path), "--limit", host, "--format", "json")
    [report] = json.loads(proc.stdout)["hosts"]
    return finding_ids([f for f in report["findings"] if f["severity"] == "error"])


def node_python(shell: Host) -> str:
    """The host's python3, MAJOR.MINOR, the host made to match NODE_SPEC: python3-venv and
    tmux (the first fault's package) installed from Debian's mirror through the machine's NAT,
    core_dumps' files written as the converge writes them, and the spec in place."""
    files = " && ".join(
        f"install -D -m 0644 /dev/null {path} && printf %s {shlex.quote(text)} > {path}"
        for path, text in MANAGED_FILES.items()
    )
    shell.check_output("apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install "
                       f"-y -qq python3-venv tmux >/dev/null && {files} && install -d "
                       f"/etc/gpurig && printf %s {shlex.quote(yaml.safe_dump(NODE_SPEC))} "
                       f"> {SPEC}")  # fmt: skip
    return shell.check_output("python3 -c 'import sys; print(*sys.version_info[:2], sep=\".\")'")


def release_python(suite: str) -> str:
    """The release's python3, as gpurig/data/releases.yaml records it."""
    return table("releases.yaml")["python3"][f"debian {RELEASES[suite]}"]


def copy_in(box: Sandbox, host: str, top: Path, name: str) -> None:
    """`top/name` into WORK on the host, over the sandbox's SSH."""
    packed = subprocess.run(["tar", "-C", str(top), "-cf", "-", name], capture_output=True,
                            check=True).stdout  # fmt: skip
    ssh = ["ssh", "-F", str(box.paths.ssh_config), host, f"mkdir -p {WORK} && tar -C {WORK} -xf -"]
    subprocess.run(ssh, input=packed, check=True, timeout=120)


SHARED = r"find {} ! -type l \( -perm /022 -o ! -user root \)"  # what another account could change


@pytest.mark.parametrize("release_host", ["bullseye"], indirect=True)
def test_the_node_agent_runs_on_debian_11s_python(
    sandbox: Sandbox, release_host: str, tmp_path: Path
) -> None:
    shell = remote(sandbox, release_host)
    version = node_python(shell)
    assert version == "3.9"
    house = subprocess.run(["sh", "scripts/wheelhouse.sh", str(tmp_path / "wheels"), version],
                           cwd=REPO_ROOT, capture_output=True, text=True)  # fmt: skip
    assert house.returncode == 0, house.stderr[-3000:]
    names = {p.name.split("-")[0].lower() for p in (tmp_path / "wheels").glob("*.whl")}
    assert "pyyaml" in names and not {"pyinfra", "gevent", "paramiko", "click"} & names
    shell.check_output(f"rm -rf /opt/gpurig /usr/local/bin/gpurig {WORK}")
    copy_in(sandbox, release_host, tmp_path, "wheels")
    _, node = readme_steps()
    done = shell.run(f"cd {WORK} && sh -euc {shlex.quote(node)}")
    assert done.rc == 0, done.stdout + done.stderr
    assert (
        shell.check_output("/opt/gpurig/bin/python -c 'import sys; print(sys.version)'")[:4]
        == "3.9."
    )
    assert shell.check_output(SHARED.format("/opt/gpurig")) == ""

    # Clean: NPD says ok, the Prolog lets the job start; with no SLURM on the host the health
    # check cannot act, and says so (exit 2: "could not check", never a drain).
    npd, said = contract(shell, "npd")
    assert npd == 0 and said.strip() == "gpurig: ok", said
    assert contract(shell, "prolog")[0] == 0
    health, said = contract(shell, "healthcheck")
    assert health == 2 and "cannot act: no scontrol" in said, said
    assert judged_here(shell) == (0, set()) and over_ssh(sandbox, release_host, tmp_path) == set()

    # A package removed by hand: each contract finds it, as drift over SSH does.
    command, ids = FAULTS[0]
    shell.check_output(command)
    expected = over_ssh(sandbox, release_host, tmp_path)
    assert expected == ids == {"packages.missing"}
    assert judged_here(shell) == (1, expected)
    npd, said = contract(shell, "npd")
    assert npd == 1 and said.strip() == "gpurig: packages.missing", said
    prolog, said = contract(shell, "prolog")
    assert prolog == 1 and "packages.missing: packages tmux" in said, said
    health, said = contract(shell, "healthcheck")
    assert health == 2 and "packages.missing" in said and "cannot act" in said, said

    # The full install's floor, said where it is asked for.
    up = shell.run(f"gpurig up --local --spec {SPEC}")
    full = ".".join(map(str, FULL_PYTHON))
    assert up.rc == 1 and f"gpurig up --local needs Python {full} or newer" in up.stderr
    assert "this is Python 3.9" in up.stderr


DEB_DIRS = "/opt/gpurig /usr/lib/gpurig /usr/share/gpurig"
TEXTFILE = "/var/lib/prometheus/node-exporter"  # where the health check wrapper writes


def build_deb(out: Path, python: str) -> Path:
    """The node's .deb (scripts/node_deb.sh) for nodes whose python3 is `python`, in `out`."""
    built = subprocess.run(["sh", "scripts/node_deb.sh", str(out), python],
                           cwd=REPO_ROOT, capture_output=True, text=True)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    [deb] = out.glob("gpurig-node_*.deb")
    return deb


@pytest.mark.parametrize("release_host", ["bullseye", "trixie"], indirect=True)
def test_the_deb_installs_offline_runs_and_removes_cleanly(
    sandbox: Sandbox, release_host: str, tmp_path: Path
) -> None:
    shell = remote(sandbox, release_host)
    suite = sandbox.state.hosts[release_host].release
    version = node_python(shell)
    assert version == release_python(suite)
    deb = build_deb(tmp_path / "deb", version)
    shell.check_output(f"rm -rf /opt/gpurig /usr/local/bin/gpurig {WORK}")
    copy_in(sandbox, release_host, tmp_path / "deb", deb.name)
    # The admin's pip settings must not reach the postinst's install (it is offline, by hash).
    done = shell.run(f"PIP_INDEX_URL=http://192.0.2.1/ dpkg -i {WORK}/{deb.name}")
    assert done.rc == 0, done.stdout + done.stderr
    assert shell.check_output(SHARED.format(DEB_DIRS)) == ""
    venv = shell.check_output("/opt/gpurig/bin/python -c 'import sys; print(sys.version)'")
    assert venv.startswith(f"{version}."), venv
    shell.check_output(f"install -d {TEXTFILE}")
    npd = json.loads(shell.check_output("cat /usr/lib/gpurig/npd-gpurig.json"))["rules"][0]
    plugin = f"cd / && env -i {npd['path']} {shlex.join(npd['args'])}"
    prolog = "cd / && env -i /usr/lib/gpurig/gpurig-prolog"
    health = "cd / && env -i /usr/lib/gpurig/gpurig-healthcheck"

    # Clean; with no SLURM on the host the health check says it could not act (exit 2).
    assert shell.run(plugin).stdout.strip() == "gpurig: ok"
    assert shell.run(prolog).rc == 0
    checked = shell.run(health)
    assert checked.rc == 2 and "ok: cannot act: no scontrol" in checked.stdout, checked.stdout
    assert "gpurig_" in shell.check_output(f"cat {TEXTFILE}/gpurig_drift.prom")

    # Each hand-made fault: the ids a Debian 12 host gives for it (test_slurm.py), from all
    # three contracts.
    for command, ids in FAULTS:
        shell.check_output(command)
        found = shell.run(plugin)
        line = found.stdout.strip()
        assert found.rc == 1 and line.startswith("gpurig: "), line
        assert set(line.removeprefix("gpurig: ").split()) == ids, line
        refused = shell.run(prolog)
        said = refused.stdout + refused.stderr
        assert refused.rc == 1 and all(f"{i}: " in said for i in ids), said
        checked = shell.run(health)
        said = checked.stdout + checked.stderr
        assert checked.rc == 2 and "cannot act" in said and all(i in said for i in ids), said

    removed = shell.run("dpkg -r gpurig-node")
    assert removed.rc == 0, removed.stdout + removed.stderr
    assert shell.run(f"ls -d {DEB_DIRS}").stdout == ""
    assert "ok installed" not in shell.run("dpkg-query -W -f '${Status}' gpurig-node").stdout
