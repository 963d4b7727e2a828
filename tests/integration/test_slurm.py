"""gpurig inside a real SLURM cluster: `gpurig sandbox up --slurm` (Debian 12's SLURM 22.05 and
MUNGE on three full hosts, user alice with a home on a directory of this machine), gpurig
installed on each node as an operator would (its wheel and the locked dependencies' wheels,
pip-installed offline into a root-owned venv with the node's own python3), and the node
contracts run by slurmd itself: the Prolog refusing alice's job on a drifted node, the
HealthCheckProgram draining and resuming with its `gpurig:` reason, the textfile on the node,
NPD's contract run as NPD runs it, and nothing of another account's run as root. Then the
same drain and resume through the offline .deb's wrappers (scripts/node_deb.sh), and a node
finding for test_node_py39.py's hand-made faults the ids its Debian 11 and 13 hosts find.

Alice's own side, as the README shows it: from the login node (slurm-ctl, over SSH as
alice) she submits the README's job script with `sbatch`; on the node the job runs the
user-scope converge with the README's spec (`gpurig up --local`, the cluster's install), then
a container through her rootless Podman socket named by DOCKER_HOST. `sandbox status` shows
the cluster's readiness.

The SLURM hosts start only for this module (its `cluster` fixture); the session's sandbox is
shared with the other integration tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import testinfra
import yaml
from prometheus_client.parser import text_string_to_metric_families
from support import REPO_ROOT, Sandbox, remote, write_inventory
from test_node_py39 import CORE_LIMITS, FAULTS, NODE_SPEC, build_deb, judged_here, over_ssh

from gpurig.fsutil import xdg_dir
from gpurig.remote.converge import converge
from gpurig.sandbox import slurm

pytestmark = [pytest.mark.sandbox, pytest.mark.slurm]

CONTROLLER, NODES, USER = slurm.CONTROLLER, slurm.NODES, slurm.USER
HOME = f"{slurm.SHARED}/home/{USER}"
EXAMPLES = REPO_ROOT / "examples"
VENV = "/opt/gpurig"
SPEC_PATH = "/etc/gpurig/node.yaml"
TEXTFILE = "/var/lib/prometheus/node-exporter/gpurig_drift.prom"
# What each node declares: the converge makes it so, the contracts check it.
SPEC = {
    "engine": "none",
    "gpu": "absent",
    "core_dumps": "disabled",
    "packages": ["slurmd", "munge"],
    "checks": {"disk_free_min": "1g", "inodes_free_min_pct": 5},
    # Configuration drift is reported by default; these tests drain for it.
    "node_contracts": {"actions": {"core_dumps.*": "drain"}},
}
HEALTH_INTERVAL = 10  # seconds; the example's 300 would make this test wait minutes


def wheelhouse() -> Path:
    """gpurig's wheel built from this checkout (`uv build`) beside its locked dependencies'
    wheels (uv.lock exported with hashes, `pip download --require-hashes`), the dependencies
    cached by the lock's hash: what a site copies to nodes that cannot reach PyPI."""
    lock = (REPO_ROOT / "uv.lock").read_bytes()
    deps = xdg_dir("XDG_CACHE_HOME", ".cache", f"wheels-{hashlib.sha256(lock).hexdigest()[:12]}")
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"
    if not (deps / "requirements.txt").exists():
        with tempfile.TemporaryDirectory() as tmp:
            requirements = Path(tmp, "requirements.txt")
            subprocess.run([uv, "export", "--frozen", "--no-dev", "--no-emit-project",
                            "--format", "requirements-txt", "-o", str(requirements)],
                           cwd=REPO_ROOT, check=True, capture_output=True)  # fmt: skip
            subprocess.run([sys.executable, "-m", "venv", str(Path(tmp, "pip"))], check=True)
            pip = str(Path(tmp, "pip", "bin", "pip"))
            subprocess.run([pip, "download", "-q", "--no-deps", "--require-hashes",
                            "--only-binary", ":all:", "-r", str(requirements),
                            "-d", str(Path(tmp, "wheels"))], check=True)  # fmt: skip
            shutil.copy(requirements, Path(tmp, "wheels"))
            if deps.exists():
                shutil.rmtree(deps)
            deps.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(Path(tmp, "wheels"), deps)
    house = Path(tempfile.mkdtemp(prefix="gpurig-wheels-"))
    shutil.copytree(deps, house, dirs_exist_ok=True)
    subprocess.run([uv, "build", "--wheel", "--out-dir", str(house)],
                   cwd=REPO_ROOT, check=True, capture_output=True)  # fmt: skip
    return house


def node(sandbox: Sandbox, name: str) -> testinfra.host.Host:
    return remote(sandbox, name)


def sh(host: testinfra.host.Host, script: str) -> str:
    """Run `script` as root on `host`; its stdout, or the failure with everything it said."""
    out = host.run(script)
    assert out.rc == 0, f"{script!r}: rc {out.rc}: {out.stdout}{out.stderr}"
    return out.stdout


def as_user(script: str) -> str:
    """`script` run as the cluster's user, from its home, with a login environment."""
    return f"runuser -l {USER} -c {shlex.quote(script)}"


def wait_for(what: str, probe: Callable[[], object], timeout: float = 90.0) -> object:
    """Poll `probe` until it returns something truthy; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(1)


def node_line(ctl: testinfra.host.Host, name: str) -> str:
    return sh(ctl, f"scontrol show node {name} --oneliner")


def node_state(ctl: testinfra.host.Host, name: str) -> tuple[str, str | None]:
    """(State=..., Reason=... without slurmctld's [user@time]) of one node."""
    line = node_line(ctl, name)
    state = re.search(r" State=(\S+) ", line)
    reason = re.search(r" Reason=(.*?) \[[^\]]*@[^\]]*\]", line)
    assert state, line
    return state.group(1), reason.group(1) if reason else None


def job_state(ctl: testinfra.host.Host, job: str) -> tuple[str, str]:
    out = sh(ctl, f"squeue --noheader --jobs {job} --format '%T|%r' || true").strip()
    state, _, reason = out.partition("|")
    return state, reason


def textfile(host: testinfra.host.Host) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = sh(host, f"cat {TEXTFILE}")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def core_dumps_findings(host: testinfra.host.Host) -> float:
    return textfile(host)["gpurig_drift_findings", (("id", "core_dumps.file"),
                                                    ("severity", "error"))]  # fmt: skip


def set_slurm_conf(sandbox: Sandbox, extra: str) -> None:
    """slurm.conf as `up --slurm` wrote it plus `extra`, on all three hosts, then reconfigure."""
    hosts = [sandbox.state.hosts[name] for name in (CONTROLLER, *NODES)]
    text = slurm.slurm_conf(hosts[0], hosts[1:]) + extra
    for rec in hosts:
        host = node(sandbox, rec.name)
        sh(host, f"printf %s {shlex.quote(text)} >{slurm.CONF}.new && mv {slurm.CONF}.new "
                 f"{slurm.CONF}")  # fmt: skip
    sh(node(sandbox, CONTROLLER), "scontrol reconfigure")


@pytest.fixture(scope="module")
def cluster(sandbox: Sandbox) -> Sandbox:
    """The session's sandbox with its SLURM cluster (`up --slurm` on top of it)."""
    began = time.monotonic()
    proc = sandbox.cli("up", "--fleet", "0", "--full", "0", "--slurm")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(f"\nup --slurm: {time.monotonic() - began:.1f} s\n{proc.stdout}")
    assert sandbox.state.slurm["nodes"] == list(NODES)
    return sandbox


@pytest.fixture(scope="module")
def installed(cluster: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    """gpurig in a root-owned venv on each node, its spec, the example wrappers, and the
    nodes converged to the spec (gpurig's own converge, over SSH)."""
    house = wheelhouse()
    shared = slurm.shared_dir(cluster.top) / "wheels"
    shutil.copytree(house, shared, dirs_exist_ok=True)
    shutil.rmtree(house)
    wheel = next(shared.glob("gpurig-*.whl")).name
    spec = yaml.safe_dump(SPEC)
    began = time.monotonic()

    def install(name: str) -> None:
        host = node(cluster, name)
        wheels = f"{slurm.SHARED}/wheels"
        pip = f"{VENV}/bin/pip install -q --no-index --find-links {wheels} --no-deps"
        sh(host, f"python3 -m venv {VENV} && "
                 f"{pip} --require-hashes -r {wheels}/requirements.txt && "
                 f"{pip} {wheels}/{wheel}")  # fmt: skip
        sh(host, f"install -d -m 0755 /etc/gpurig /var/lib/prometheus/node-exporter && "
                 f"printf %s {shlex.quote(spec)} >{SPEC_PATH}")  # fmt: skip
        sh(host, f"ln -sfn {VENV}/bin/gpurig /usr/local/bin/gpurig")  # users' jobs run it
        for script in ("gpurig-prolog", "gpurig-healthcheck"):
            text = (EXAMPLES / "slurm" / script).read_text()
            sh(host, f"printf %s {shlex.quote(text)} >/etc/slurm/{script} && "
                     f"chmod 0755 /etc/slurm/{script}")  # fmt: skip

    with ThreadPoolExecutor(len(NODES)) as pool:
        list(pool.map(install, NODES))
    print(f"\ngpurig installed on {', '.join(NODES)} in {time.monotonic() - began:.1f} s")
    inventory = write_inventory(
        cluster, tmp_path_factory.mktemp("slurm") / "inventory.yaml", dict.fromkeys(NODES, SPEC)
    )
    done = converge([inventory], limit=list(NODES))
    assert done.returncode == 0, done.stderr
    return cluster


def test_cluster_runs_alice_s_jobs_on_shared_storage(cluster: Sandbox) -> None:
    ctl = node(cluster, CONTROLLER)
    states = sh(ctl, "sinfo --noheader --Node --format='%N %T'").split("\n")
    assert sorted(line for line in states if line) == [f"{n} idle" for n in NODES]
    uids = {name: sh(node(cluster, name), f"id -u {USER}").strip()
            for name in (CONTROLLER, *NODES)}  # fmt: skip
    assert set(uids.values()) == {str(slurm.UID)}, uids
    # No sudo rights: not in the sudo group, and sudo refuses.
    assert "sudo" not in sh(ctl, f"id -nG {USER}").split()
    assert ctl.run(as_user("sudo -n true")).rc != 0
    # A job on each node writes into the shared home; the controller (and this machine) see it.
    for name in NODES:
        out = sh(ctl, as_user(f"sbatch --wait --parsable -w {name} -o /dev/null "
                              f"--wrap 'hostname > ~/ran-on-{name}'"))  # fmt: skip
        assert out.strip().isdigit()
        assert sh(ctl, f"cat {HOME}/ran-on-{name}").strip() == name
        shared = slurm.shared_dir(cluster.top) / "home" / USER / f"ran-on-{name}"
        assert shared.read_text().strip() == name
        assert shared.stat().st_uid == slurm.UID


def test_sandbox_status_shows_the_cluster_and_each_node_s_state(cluster: Sandbox) -> None:
    rc, rows = status(cluster)
    assert rc == 0
    print(f"\n$ gpurig sandbox status\n{cluster.cli('status').stdout}")
    assert [(r["name"], r["kind"], r["up"], r["state"]) for r in rows if "state" in r] == [
        ("slurmctld", "slurm", True, "sinfo answers"),
        *((name, "slurmd", True, "idle") for name in NODES),
    ]
    ctl = node(cluster, CONTROLLER)
    sh(ctl, f"scontrol update NodeName={NODES[1]} State=DRAIN Reason='status test'")
    try:
        rc, rows = status(cluster)
        assert rc == 1
        assert [(r["up"], r["state"]) for r in rows if r["name"] == NODES[1] and "state" in r] == [
            (False, "drained")
        ]
        text = cluster.cli("status").stdout
        assert re.search(rf"^{NODES[1]} +slurmd +\S+:6818 +DOWN \(drained\)$", text, re.M), text
    finally:
        sh(ctl, f"scontrol update NodeName={NODES[1]} State=RESUME")
    wait_for("node resumed", lambda: status(cluster)[0] == 0)


def status(box: Sandbox) -> tuple[int, list[dict]]:
    proc = box.cli("status", "--json")
    return proc.returncode, json.loads(proc.stdout)


def readme_block(first: str) -> str:
    """The README's fenced block that starts with `first`: what a user copies."""
    text = (REPO_ROOT / "README.md").read_text()
    blocks = [
        b for b in re.findall(r"^```\w*\n(.*?)^```", text, re.M | re.S) if b.startswith(first)
    ]
    assert len(blocks) == 1, f"README: {len(blocks)} blocks start with {first!r}"
    return blocks[0]


def at_login(box: Sandbox, script: str, stdin: str | None = None) -> str:
    """`script` run by alice over SSH on the login node (slurm-ctl), as she submits jobs."""
    done = subprocess.run(["ssh", "-F", str(box.paths.ssh_config), f"{CONTROLLER}-{USER}", script],
                          input=stdin, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, (script, done.stdout, done.stderr[-2000:])
    return done.stdout


# Sourced by the job's bash (BASH_ENV; the script itself stays the README's): each command of
# the job with the time it starts, and the time it ends, for the times inside the job.
TIMING = """\
trace() { printf '%s %s\\n' "$EPOCHREALTIME" "$1" >>"$HOME/trace-$SLURM_JOB_ID"; }
trap 'trace "$BASH_COMMAND"' DEBUG
trap 'trace "(end)"' EXIT
"""
# What else a job's output may hold: Podman's client warning, e.g. that the job inherited
# XDG_RUNTIME_DIR=/run/user/UID from the login node, where the compute node has none.
PODMAN_WARNING = re.compile(r'time="[^"]+" level=warning msg=".*"')


@dataclass
class Job:
    id: str
    state: str
    exit_code: str
    lines: list[str]  # its output file
    queued_to_end: int  # seconds from SubmitTime to EndTime (SLURM's whole seconds)
    converge: float  # seconds of `ready=$(gpurig up ...)` inside the job
    container: float  # seconds from the container's command to the job's end
    wall: float  # `sbatch --wait` here, SSH included

    def gpurig(self) -> list[str]:
        """gpurig's lines; every other line but the container's is a Podman warning."""
        rest = [line for line in self.lines[:-1] if not line.startswith("gpurig up: ")]
        assert all(PODMAN_WARNING.fullmatch(line) for line in rest), self.lines
        return [line for line in self.lines if line.startswith("gpurig up: ")]


def submit(box: Sandbox, on: str, image: str) -> Job:
    """The README's job script submitted by alice to node `on`, waited for; what it did."""
    began = time.monotonic()
    out = at_login(box, f"env BASH_ENV=$HOME/.job-timing sbatch --parsable --wait -w {on} "
                   f"runtime.sh {shlex.quote(image)} || true")  # fmt: skip
    wall = time.monotonic() - began
    job = out.split(";")[0].strip()
    assert job.isdigit(), out
    shown = dict(
        field.split("=", 1)
        for field in sh(node(box, CONTROLLER), f"scontrol show job {job} --oneliner").split()
        if "=" in field
    )
    home = slurm.shared_dir(box.top) / "home" / USER
    lines = (home / f"runtime-{job}.out").read_text().splitlines()
    trace = (home / f"trace-{job}").read_text().splitlines()
    # The job's own next command after `ready=$(gpurig up ...)`: the eval, or its exit 1
    # (the lines between are gpurig's bash children, which read BASH_ENV too).
    steps = [(float(t), command) for t, _, command in (line.partition(" ") for line in trace)]
    up_began = next(t for t, command in steps if command.startswith("ready=$(gpurig up"))
    up_ended = next(t for t, command in steps if command in ('eval "$ready"', "exit 1"))
    run = next((t for t, command in steps if command.startswith("podman --url")), steps[-1][0])
    stamp = "%Y-%m-%dT%H:%M:%S"
    queued = time.mktime(time.strptime(shown["EndTime"], stamp)) - time.mktime(
        time.strptime(shown["SubmitTime"], stamp)
    )
    converge, container = up_ended - up_began, steps[-1][0] - run
    return Job(job, shown["JobState"], shown["ExitCode"], lines, int(queued), converge,
               container, wall)  # fmt: skip


def test_alice_s_sbatch_job_converges_its_node_and_runs_a_container(installed: Sandbox) -> None:
    """A SLURM user's side: the README's job script and spec, submitted with
    sbatch by alice from the login node; the job's user-scope converge starts her rootless
    Podman, and `podman --url "$DOCKER_HOST" run` runs a container through it."""
    box, image = installed, installed.state.images["train"]
    spec = yaml.safe_load(readme_block("scope: user "))
    assert re.fullmatch(r"[\d.:]+/sandbox/train@sha256:[0-9a-f]{64}",
                        spec["containers"]["runtime"]["image"])  # fmt: skip
    spec["insecure_registries"] = [box.registry]
    spec["containers"]["runtime"]["image"] = image  # this sandbox's registry and digest
    script = readme_block("#!/bin/bash\n#SBATCH --job-name=runtime\n")
    storage = readme_block("# ~/.config/containers/storage.conf")
    uid = at_login(box, "id -u").strip()
    assert uid == str(slurm.UID) and f"/var/tmp/containers-{uid}/" in storage
    at_login(box, "cat > node.yaml", yaml.safe_dump(spec))
    at_login(box, "cat > runtime.sh", script)
    at_login(box, "mkdir -p ~/.config/containers && cat > ~/.config/containers/storage.conf",
             storage)  # fmt: skip
    at_login(box, "cat > .job-timing", TIMING)
    jobs: list[tuple[str, Job]] = []

    first = submit(box, NODES[0], image)
    jobs.append(("first on " + NODES[0], first))
    assert (first.state, first.exit_code) == ("COMPLETED", "0:0"), first
    converging, ready = first.gpurig()
    assert converging.startswith(f"gpurig up: converging {NODES[0]}: "), first.lines
    assert "engine.user_service" in converging and "engine.docker_host" in converging
    assert ready == f"gpurig up: {NODES[0]} ready (converged)"
    assert first.lines[-1] == f"hello from job {first.id} on {NODES[0]}"

    # The next job: nothing to change, the same socket, a container again.
    second = submit(box, NODES[0], image)
    jobs.append(("second on " + NODES[0], second))
    assert (second.state, second.exit_code) == ("COMPLETED", "0:0"), second
    assert second.gpurig() == [f"gpurig up: {NODES[0]} ready (already as declared)"]
    assert second.lines[-1] == f"hello from job {second.id} on {NODES[0]}"
    # Where a converged node's `gpurig up` spends its time, in a job as she runs it (printed:
    # a benchmark, not a timed test).
    at_login(
        box, "cat > up_breakdown.py", (REPO_ROOT / "benchmarks" / "up_breakdown.py").read_text()
    )
    breakdown = at_login(box, f"srun -w {NODES[0]} {VENV}/bin/python -I up_breakdown.py "
                              "~/node.yaml --runs 5")  # fmt: skip
    print(f"\ngpurig up --local in a job on {NODES[0]}, by phase:\n{breakdown}")

    # Her home (profile, spec, storage.conf) is shared; the other node starts its own service.
    other = submit(box, NODES[1], image)
    jobs.append(("first on " + NODES[1], other))
    assert (other.state, other.exit_code) == ("COMPLETED", "0:0"), other
    assert other.gpurig() == [f"gpurig up: converging {NODES[1]}: engine.user_service",
                              f"gpurig up: {NODES[1]} ready (converged)"]  # fmt: skip
    assert other.lines[-1] == f"hello from job {other.id} on {NODES[1]}"

    # The containers ran in her rootless Podman, its storage on each node's own disk.
    sock = f"/tmp/podman-run-{uid}/podman/podman.sock"
    for name in NODES:
        seen = sh(node(box, name), as_user(
            f"export CONTAINER_HOST=unix://{sock}; podman --remote ps --format '{{{{.Names}}}}' && "
            "podman --remote info --format '{{.Host.Security.Rootless}} {{.Store.GraphRoot}}' && "
            f"pgrep -u {USER} -cf '[s]ystem service --time=0 unix://{sock}'"
        )).split()  # fmt: skip
        assert seen[:3] == ["runtime", "true", f"/var/tmp/containers-{uid}/storage"], (name, seen)
    assert not (
        slurm.shared_dir(box.top) / "home" / USER / ".local/share/containers/storage"
    ).exists()

    # A node that cannot serve the job: the job fails at its first line, no container runs.
    at_login(box, "cp node.yaml node.yaml.saved && sed -i 's/^gpu: auto$/gpu: required/' node.yaml")
    try:
        refused = submit(box, NODES[1], image)
    finally:
        at_login(box, "mv node.yaml.saved node.yaml")
    jobs.append(("refused on " + NODES[1], refused))
    assert (refused.state, refused.exit_code) == ("FAILED", "1:0"), refused
    [line] = refused.lines
    assert line.startswith(f"gpurig up: {NODES[1]} cannot serve this job: gpu.missing: "), line

    for label, job in jobs:
        print(
            f"\njob {job.id} ({label}): submit to end {job.queued_to_end} s (SLURM's times), "
            f"sbatch --wait {job.wall:.1f} s, gpurig up in the job {job.converge:.2f} s, "
            f"then the container {job.container:.2f} s"
        )
    for line in [*first.lines, *second.lines, *other.lines, *refused.lines]:
        print(f"  | {line}")


# Tools a prolog, a health check or NPD's plugin could start by name, planted in a directory
# alice owns at the head of PATH: each logs who ran it, then runs the real one.
PLANTED_TOOLS = (
    "sh", "bash", "dash", "id", "cat", "sed", "df", "stat", "readlink", "timeout", "setpriv",
    "date", "grep", "env", "python3", "python", "scontrol", "logger", "systemctl",
    "dpkg-query", "nvidia-smi", "curl", "docker", "podman", "git", "journalctl", "dmesg",
)  # fmt: skip
# Modules gpurig imports, planted in alice's working directory and on PYTHONPATH.
PLANTED_MODULES = ("json", "yaml", "click", "gevent", "pyinfra", "subprocess")
PLANTED = "/tmp/plant"  # one empty file per run: WHAT.UID (not sticky: root may write here)


def plant(host: testinfra.host.Host) -> str:
    """alice's tools and modules; the environment a careless wrapper would pass them in."""
    tool = (
        f'#!/bin/sh\n: >"{PLANTED}/$(basename "$0").$(/usr/bin/id -u)"\n'
        'exec "/usr/bin/$(basename "$0")" "$@"\n'
    )
    module = f"import os\nopen(f'{PLANTED}/{{__name__}}.py.{{os.getuid()}}', 'w').close()\n"
    # Shell files a login or non-interactive bash would run: her profile, and a BASH_ENV file.
    runs_id = f"{HOME}/bin/id -u >/dev/null  # planted\n"
    sh(host, f"rm -rf {PLANTED} && install -d -m 0777 {PLANTED}")
    sh(host, as_user(
        "mkdir -p ~/bin ~/work && cd ~/bin && "
        + " && ".join(f"printf %s {shlex.quote(tool)} >{t} && chmod 755 {t}" for t in PLANTED_TOOLS)
        + " && cd ~/work && "
        + " && ".join(f"printf %s {shlex.quote(module)} >{m}.py" for m in PLANTED_MODULES)
        + f" && printf %s {shlex.quote(runs_id)} >env.sh"
        + f" && {{ grep -q planted ~/.profile || printf %s {shlex.quote(runs_id)} >>~/.profile; }}"
    ))  # fmt: skip
    return (f"cd {HOME}/work && env PATH={HOME}/bin:/usr/sbin:/usr/bin:/sbin:/bin "
            f"PYTHONPATH={HOME}/work HOME={HOME} BASH_ENV={HOME}/work/env.sh "
            f"ENV={HOME}/work/env.sh SLURMD_NODENAME={NODES[0]}")  # fmt: skip


def planted_runs(host: testinfra.host.Host) -> list[tuple[str, str]]:
    """(what ran, as which uid) for each planted tool or module that ran."""
    names = sh(host, f"ls {PLANTED}").split()
    return [tuple(name.rsplit(".", 1)) for name in names]  # type: ignore[misc]


def test_no_code_another_account_can_change_runs_as_root(installed: Sandbox) -> None:
    host = node(installed, NODES[0])
    env = plant(host)
    rule = json.loads((EXAMPLES / "npd-gpurig.json").read_text())["rules"][0]
    runs = {
        "prolog": "/etc/slurm/gpurig-prolog",
        "healthcheck": "/etc/slurm/gpurig-healthcheck",
        "npd": shlex.join([rule["path"], *rule["args"]]),
    }
    for mode, command in runs.items():
        out = host.run(f"{env} {command}")
        assert out.rc == 0, f"{mode}: {out.stdout}{out.stderr}"
    assert planted_runs(host) == []
    # The plants work: alice's PATH runs her `id`, and a python started without -I in her
    # directory imports her json.py (what -I and gpurig's fixed PATH keep out).
    sh(host, as_user(f"{env} sh -c 'id -u' >/dev/null"))
    assert ("id", str(slurm.UID)) in planted_runs(host)
    # A login shell root starts in this environment runs her profile and her BASH_ENV file
    # (what gpurig's read, root's HOME and no BASH_ENV, keeps out).
    sh(host, f"{env} bash -lc true")
    assert ("id", "0") in planted_runs(host)
    sh(host, f"{env} {VENV}/bin/python -c 'import json'")
    assert ("json.py", "0") in planted_runs(host)


def npd(host: testinfra.host.Host) -> tuple[int, str, float]:
    """The example's rule run as NPD runs it: its path and args, no shell, NPD's own
    environment (none of ours), killed after the rule's timeout; (exit, stdout trimmed, s)."""
    rule = json.loads((EXAMPLES / "npd-gpurig.json").read_text())["rules"][0]
    limit = int(rule["timeout"].rstrip("s"))
    argv = shlex.join(
        ["env", "-i", "timeout", "-s", "KILL", str(limit), rule["path"], *rule["args"]]
    )
    out = host.run(f"cd / && s=$(date +%s%N); {argv} >/tmp/npd.out 2>/dev/null; rc=$?; "
                   f"e=$(date +%s%N); echo $rc $(((e - s) / 1000000))")  # fmt: skip
    code, millis = out.stdout.split()
    return int(code), sh(host, "cat /tmp/npd.out").strip(), int(millis) / 1000


def test_npd_plugin_contract_run_as_npd_runs_it(installed: Sandbox) -> None:
    host = node(installed, NODES[1])
    times = []
    code, line, seconds = npd(host)
    times.append(seconds)
    assert (code, line) == (0, "gpurig: ok")
    sh(host, f"mv {CORE_LIMITS} /root/core-limits.saved")
    try:
        code, line, seconds = npd(host)
        times.append(seconds)
        assert (code, line) == (1, "gpurig: core_dumps.file")
        sh(host, f"cp {SPEC_PATH} /root/node.yaml.saved && echo 'core_dumps: maybe' >{SPEC_PATH}")
        code, line, seconds = npd(host)
        times.append(seconds)
        assert code == 2 and line == "gpurig: could not check: invalid spec (see stderr or syslog)"
    finally:
        saved = "/root/node.yaml.saved"
        sh(host, f"mv /root/core-limits.saved {CORE_LIMITS}; "
                 f"[ ! -f {saved} ] || mv {saved} {SPEC_PATH}")  # fmt: skip
    print(f"\nnpd mode on {NODES[1]}: {', '.join(f'{t:.2f}' for t in times)} s")
    assert max(times) < 5


def timed(host: testinfra.host.Host, name: str, command: str, runs: int = 3) -> list[float]:
    """Wall seconds of `command` run as slurmd runs a prolog: as root, no PATH, from /."""
    seconds = []
    for _ in range(runs):
        out = host.run(f"cd / && s=$(date +%s%N); env -i SLURMD_NODENAME={name} "
                       f"{command} >/dev/null 2>&1; e=$(date +%s%N); "
                       "echo $(((e - s) / 1000000))")  # fmt: skip
        seconds.append(int(out.stdout.strip()) / 1000)
    return seconds


def test_each_mode_finishes_within_its_engine_s_time(installed: Sandbox) -> None:
    host = node(installed, NODES[1])
    limits = {"prolog": 10, "healthcheck": 60}
    for mode, limit in limits.items():
        seconds = timed(host, NODES[1], f"/etc/slurm/gpurig-{mode}")
        print(f"\n{mode} on {NODES[1]}: {', '.join(f'{t:.2f}' for t in seconds)} s")
        assert max(seconds) < limit


def refused_and_drained(box: Sandbox, name: str, marker: str) -> str:
    """Drift on node `name` (its core-dump limits file removed), then alice's job there: the
    Prolog refuses it, drains the node with its reason, SLURM requeues the job held; it never
    ran (it would write ~/`marker`). The job's id."""
    ctl, host = node(box, CONTROLLER), node(box, name)
    since = sh(host, "date +%s").strip()
    sh(host, f"rm {CORE_LIMITS}")
    job = sh(ctl, as_user(f"sbatch --parsable -w {name} -o /dev/null "
                          f"--wrap 'hostname > ~/{marker}'")).strip()  # fmt: skip
    held = wait_for("job held", lambda: (lambda st: st[0] == "PENDING" and "held" in st[1] and st)(
        job_state(ctl, job)))  # fmt: skip
    assert held == ("PENDING", "launch failed requeued held")
    state, reason = node_state(ctl, name)
    assert "DRAIN" in state.split("+") and reason == "gpurig: core_dumps.file"
    assert host.run(f"test -e {HOME}/{marker}").rc != 0
    journal = sh(host, f"journalctl -q -t gpurig --since @{since} --no-pager -o cat")
    assert f"gpurig prolog: refused the job: drained {name}: gpurig: core_dumps.file" in journal
    return job


def fixed_and_resumed(box: Sandbox, name: str, inventory: Path, job: str, marker: str) -> None:
    """The fix (gpurig's converge of `inventory`) on node `name`: its next health check
    resumes it, and the held `job` runs there once released."""
    ctl, host = node(box, CONTROLLER), node(box, name)
    fixed = converge([inventory], limit=[name])
    assert fixed.returncode == 0, fixed.stderr
    wait_for("node resumed", lambda: "DRAIN" not in node_state(ctl, name)[0].split("+"))
    assert node_state(ctl, name)[1] is None
    # Released by hand; SLURM makes a requeued job eligible again only after about 2 minutes.
    sh(ctl, f"scontrol release {job} && scontrol update JobId={job} StartTime=now")
    wait_for("held job ran", lambda: host.run(f"test -s {HOME}/{marker}").rc == 0)
    assert sh(ctl, f"cat {HOME}/{marker}").strip() == name


def test_drift_drains_refuses_jobs_and_the_fix_resumes(installed: Sandbox, tmp_path: Path) -> None:
    """Item 4 end to end: slurmd runs gpurig's Prolog and HealthCheckProgram on a drifted node
    (its core-dump limits file removed) while alice submits jobs."""
    ctl, bad, good = (
        node(installed, CONTROLLER),
        node(installed, NODES[0]),
        node(installed, NODES[1]),
    )
    lines = (EXAMPLES / "slurm" / "slurm.conf").read_text()
    prolog_only = "".join(line + "\n" for line in lines.splitlines()
                          if line.startswith(("Prolog=", "Epilog=")))  # fmt: skip
    set_slurm_conf(installed, prolog_only)
    wait_for("nodes idle", lambda: all(node_state(ctl, n)[0] == "IDLE" for n in NODES))

    # A clean node: the Prolog (and Epilog) pass, alice's job runs.
    sh(ctl, as_user(f"sbatch --wait -w {NODES[0]} -o /dev/null --wrap 'hostname > ~/before'"))
    assert sh(ctl, f"cat {HOME}/before").strip() == NODES[0]
    # sbatch --wait returns before the Epilog has run: let it pass on the clean node first.
    wait_for("epilog done", lambda: node_state(ctl, NODES[0]) == ("IDLE", None))

    job = refused_and_drained(installed, NODES[0], "after")

    # The health check joins (every 10 s): it keeps its own reason, and its textfile on the
    # node shows the finding; the clean node's shows 0.
    health = prolog_only + "".join(
        line.replace("=300", f"={HEALTH_INTERVAL}") + "\n"
        for line in lines.splitlines() if line.startswith("HealthCheck")
    )  # fmt: skip
    set_slurm_conf(installed, health)
    wait_for("textfile with the finding", lambda: bad.run(f"test -s {TEXTFILE}").rc == 0
             and core_dumps_findings(bad) == 1)  # fmt: skip
    series = textfile(bad)
    assert series["gpurig_drift_last_run_success", ()] == 1
    wait_for("clean node's textfile", lambda: good.run(f"test -s {TEXTFILE}").rc == 0)
    assert core_dumps_findings(good) == 0
    assert node_state(ctl, NODES[0])[1] == "gpurig: core_dumps.file"

    # The fix (gpurig's converge) and the next health check resumes the node; the job runs.
    inventory = write_inventory(installed, tmp_path / "inventory.yaml", dict.fromkeys(NODES, SPEC))
    fixed_and_resumed(installed, NODES[0], inventory, job, "after")
    wait_for("textfile back to 0", lambda: core_dumps_findings(bad) == 0)

    # An operator's drain is never lifted by the health check, even on a clean node.
    sh(ctl, f"scontrol update NodeName={NODES[1]} State=DRAIN Reason='fan check'")
    seen = textfile(good)["gpurig_drift_last_run_timestamp_seconds", ()]
    wait_for("two more health checks", lambda: textfile(good)[
        "gpurig_drift_last_run_timestamp_seconds", ()] > seen + HEALTH_INTERVAL)  # fmt: skip
    assert node_state(ctl, NODES[1])[1] == "fan check"
    sh(ctl, f"scontrol update NodeName={NODES[1]} State=RESUME")

    # The health check drains by itself (no job involved), and resumes after the fix.
    sh(good, f"rm {CORE_LIMITS}")
    wait_for("health check drained", lambda: node_state(ctl, NODES[1])[1]
             == "gpurig: core_dumps.file")  # fmt: skip
    fixed = converge([inventory], limit=[NODES[1]])
    assert fixed.returncode == 0, fixed.stderr
    wait_for("resumed", lambda: "DRAIN" not in node_state(ctl, NODES[1])[0].split("+"))


def healthcheck(host: testinfra.host.Host, name: str) -> tuple[int, str, str]:
    """The example's HealthCheckProgram run as slurmd runs it: root, no PATH, from /."""
    out = host.run(f"cd / && env -i SLURMD_NODENAME={name} /etc/slurm/gpurig-healthcheck")
    return out.rc, out.stdout, out.stderr


def resume(ctl: testinfra.host.Host, name: str) -> None:
    """Resume `name` if it is drained, and wait until SLURM has it idle without a reason."""
    if "DRAIN" in node_state(ctl, name)[0].split("+"):
        sh(ctl, f"scontrol update NodeName={name} State=RESUME")
    idle(ctl, name)


def idle(ctl: testinfra.host.Host, name: str) -> None:
    wait_for(f"{name} idle", lambda: node_state(ctl, name) == ("IDLE", None), timeout=30)


def put_spec(host: testinfra.host.Host, spec: dict) -> None:
    sh(host, f"printf %s {shlex.quote(yaml.safe_dump(spec))} >{SPEC_PATH}")


def test_a_report_finding_never_drains_and_the_budget_withholds(installed: Sandbox) -> None:
    """The policy and the drain budget on the real SLURM, each contract run as slurmd runs
    it (slurmd's own health check is off here, so only these runs act): a finding the policy
    reports is said and never drains, one it drains does; a wrong but valid spec pushed to
    both nodes drains one (the default budget: 10% of 2 nodes, rounded up) and the other
    says why it withheld."""
    ctl = node(installed, CONTROLLER)
    hosts = [node(installed, name) for name in NODES]
    set_slurm_conf(installed, "")
    wait_for("nodes idle", lambda: all(node_state(ctl, n) == ("IDLE", None) for n in NODES))
    print(f"\n$ scontrol show node --oneliner\n{sh(ctl, 'scontrol show node --oneliner')}")
    base = {k: v for k, v in SPEC.items() if k != "node_contracts"}
    first, a = NODES[0], hosts[0]
    sh(a, f"mv {CORE_LIMITS} /root/core-limits.saved")
    try:
        # The default policy reports configuration drift: exit 1, said, not drained.
        put_spec(a, base)
        rc, out, err = healthcheck(a, first)
        assert rc == 1, (out, err)
        assert out.startswith(f"gpurig healthcheck: problem: {first} left as it is; not drained "
                              "for core_dumps.file (policy: report)"), out  # fmt: skip
        assert node_state(ctl, first) == ("IDLE", None)
        assert core_dumps_findings(a) == 1 and textfile(a)["gpurig_drain_withheld", ()] == 0
        # The spec drains it: drained with the reason.
        put_spec(a, {**base, "node_contracts": {"actions": {"core_dumps.file": "drain"}}})
        rc, out, err = healthcheck(a, first)
        assert rc == 1 and node_state(ctl, first) == ("IDLE+DRAIN", "gpurig: core_dumps.file")
        # Reported again: the health check lifts its own drain.
        put_spec(a, base)
        rc, out, err = healthcheck(a, first)
        assert rc == 1 and out.startswith(f"gpurig healthcheck: problem: resumed {first}"), out
        idle(ctl, first)
        # Off: left out of the report, the exit status and the textfile.
        put_spec(a, {**base, "node_contracts": {"actions": {"core_dumps.*": "off"}}})
        rc, out, err = healthcheck(a, first)
        assert rc == 0, (out, err)
        assert not [k for k in textfile(a) if ("id", "core_dumps.file") in k[1]]
    finally:
        sh(a, f"mv /root/core-limits.saved {CORE_LIMITS}")
        put_spec(a, SPEC)

    # A wrong but valid spec everywhere: disk.free (a fault: drains by default) on both.
    wrong = {**base, "checks": {"disk_free_min": "100t"}}
    try:
        for host in hosts:
            put_spec(host, wrong)
        rc, out, err = healthcheck(hosts[0], NODES[0])
        assert rc == 1 and node_state(ctl, NODES[0]) == ("IDLE+DRAIN", "gpurig: disk.free")
        rc, out, err = healthcheck(hosts[1], NODES[1])
        why = "drain withheld: 1 of 2 nodes of partition debug already drained by gpurig (budget 1)"
        assert rc == 2 and out == f"gpurig healthcheck: problem: {why}\n", (out, err)
        assert err.startswith(f"gpurig healthcheck: {why}\n"), err
        assert node_state(ctl, NODES[1]) == ("IDLE", None)
        assert textfile(hosts[1])["gpurig_drain_withheld", ()] == 1
        assert why in sh(hosts[1], "journalctl -q -t gpurig --no-pager -o cat -n 20")
        # A budget that allows both, and one node per id: the same id withholds it.
        put_spec(
            hosts[1],
            {**wrong, "node_contracts": {"drain_budget": {"max_drained": 2, "same_id": 1}}},
        )
        rc, out, err = healthcheck(hosts[1], NODES[1])
        same = "drain withheld: 1 of 2 nodes already drained by gpurig for disk.free: a spec error?"
        assert rc == 2 and out == f"gpurig healthcheck: problem: {same}\n", (out, err)
        # The budget frees when the drained node is fixed (its spec, here) and resumed.
        put_spec(hosts[0], base)
        assert healthcheck(hosts[0], NODES[0])[0] == 0
        idle(ctl, NODES[0])
        rc, out, err = healthcheck(hosts[1], NODES[1])
        assert rc == 1 and node_state(ctl, NODES[1]) == ("IDLE+DRAIN", "gpurig: disk.free")
        put_spec(hosts[1], base)
        assert healthcheck(hosts[1], NODES[1])[0] == 0
        idle(ctl, NODES[1])

        # Both nodes checking at the same moment: how closely the budget holds.
        put_spec(hosts[1], wrong)
        put_spec(hosts[0], wrong)
        drained = []
        for _ in range(3):
            with ThreadPoolExecutor(len(NODES)) as pool:
                list(pool.map(lambda i: healthcheck(hosts[i], NODES[i]), range(len(NODES))))
            drained.append(sum("DRAIN" in node_state(ctl, n)[0] for n in NODES))
            for name in NODES:
                resume(ctl, name)
        print(f"\nsimultaneous health checks, budget 1 of 2: nodes drained per round {drained}")
        assert all(1 <= n <= len(NODES) for n in drained)
    finally:
        for host, name in zip(hosts, NODES, strict=True):
            put_spec(host, SPEC)
            resume(ctl, name)


GPU_LOG = REPO_ROOT / "tests" / "fixtures" / "gpu" / "kernel_sxid_20034_with_xid_79_dmesg.txt"
FAKE_DMESG = "/usr/local/sbin/dmesg"


def test_an_acknowledged_xid_is_not_reported_again_and_the_node_resumes(
    installed: Sandbox,
) -> None:
    """`gpurig ack` on the real SLURM: a node drained for its kernel log's Xid 79 and SXid is
    resumed by its health check once a person acknowledges them, and drained again for a new
    event. The kernel log is a recorded GPU host's, printed by a `dmesg` in root's own
    /usr/local/sbin (the first of the system's directories the read and `gpurig ack` look in)
    on this disposable node: the machine's own kernel log is shared by every sandbox and test,
    and is left alone."""
    ctl, name = node(installed, CONTROLLER), NODES[1]
    host = node(installed, name)
    set_slurm_conf(installed, "")
    idle(ctl, name)
    log = "".join(line for line in GPU_LOG.read_text().splitlines(True)
                  if not line.startswith("#"))  # fmt: skip
    sh(host, f"printf %s {shlex.quote(log)} >/root/kernel.log && "
             f"printf '#!/bin/sh\\ncat /root/kernel.log\\n' >{FAKE_DMESG} && "
             f"chmod 0755 {FAKE_DMESG}")  # fmt: skip
    try:
        rc, out, err = healthcheck(host, name)
        state, reason = node_state(ctl, name)
        assert rc == 1 and state == "IDLE+DRAIN", (out, err)
        assert set((reason or "").split()) == {"gpurig:", "gpu.fallen_off_bus", "gpu.sxid"}
        done = sh(host, f"{VENV}/bin/python -I -m gpurig ack --all")
        assert "gpurig ack: gpu.fallen_off_bus: events up to 6781741.548783 s since boot" in done
        assert "gpurig ack: gpu.xid: no event in the kernel log to acknowledge" in done
        assert sh(host, "stat -c '%a %U' /var/lib/gpurig /var/lib/gpurig/ack.json").split() == [
            "700", "root", "600", "root"]  # fmt: skip
        # The next health check no longer sees them: clean, and it lifts its own drain.
        rc, out, err = healthcheck(host, name)
        assert rc == 0 and out.startswith(f"gpurig healthcheck: ok: resumed {name}"), (out, err)
        idle(ctl, name)
        acknowledged = {dict(k[1])["id"] for k in textfile(host)
                        if k[0] == "gpurig_acknowledged_timestamp_seconds"}  # fmt: skip
        assert acknowledged == {"gpu.fallen_off_bus", "gpu.sxid"}
        # A new Xid after the acknowledgement: reported, and drained, again.
        sh(host, "echo '[6781800.000001] NVRM: Xid (PCI:0000:91:00): 79, pid=1, name=x, "
                 "GPU has fallen off the bus.' >>/root/kernel.log")  # fmt: skip
        rc, out, err = healthcheck(host, name)
        assert rc == 1 and node_state(ctl, name) == ("IDLE+DRAIN", "gpurig: gpu.fallen_off_bus")
    finally:
        sh(host, f"rm -f {FAKE_DMESG} /root/kernel.log /var/lib/gpurig/ack.json")
        resume(ctl, name)


COMPARED = "/root/compared.yaml"  # test_node_py39's NODE_SPEC, beside the node's own


def test_a_debian_12_node_finds_what_the_deb_finds_on_debian_11_and_13(
    installed: Sandbox, tmp_path: Path
) -> None:
    """test_node_py39.py's hand-made FAULTS made on a Debian 12 node, judged by the normal
    install (drift --local of the venv the fixture made) and by drift over SSH: the ids the
    .deb's node contracts give for the same faults on Debian 11 and 13."""
    host = node(installed, NODES[1])
    sh(host, "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
             f"tmux >/dev/null && printf %s {shlex.quote(yaml.safe_dump(NODE_SPEC))} "
             f">{COMPARED} && cp {CORE_LIMITS} /root/core-limits.saved")  # fmt: skip
    try:
        assert judged_here(host, COMPARED) == (0, set())
        assert over_ssh(installed, NODES[1], tmp_path) == set()
        for command, ids in FAULTS:
            sh(host, command)
            assert judged_here(host, COMPARED) == (1, ids), command
            assert over_ssh(installed, NODES[1], tmp_path) == ids, command
    finally:
        sh(host, f"mv /root/core-limits.saved {CORE_LIMITS} && rm -f {COMPARED}")


PACKAGED = "/usr/lib/gpurig"  # where the .deb puts its Prolog and HealthCheckProgram wrappers


def test_the_deb_s_wrappers_drain_and_resume_a_node(installed: Sandbox, tmp_path: Path) -> None:
    """The node's offline .deb (scripts/node_deb.sh, for the nodes' python3) installed with
    dpkg on both nodes, in place of the venv the fixture made from the same wheels, and
    slurm.conf's gpurig lines naming its wrappers: the Prolog refuses a drifted node's job and
    drains it, the health check resumes it once the converge has fixed it, the held job runs.
    The package stays installed: its /opt/gpurig is what the fixture promises."""
    ctl = node(installed, CONTROLLER)
    python = sh(node(installed, NODES[0]), "python3 -c 'import sys; print(*sys.version_info[:2], "
                "sep=\".\")'").strip()  # fmt: skip
    began = time.monotonic()
    deb = build_deb(tmp_path / "deb", python)
    built = time.monotonic()
    shutil.copy(deb, slurm.shared_dir(installed.top) / deb.name)
    with ThreadPoolExecutor(len(NODES)) as pool:
        list(pool.map(lambda name: sh(node(installed, name),
                                      f"dpkg -i {slurm.SHARED}/{deb.name}"), NODES))  # fmt: skip
    ready = time.monotonic()
    print(f"\n.deb for Python {python} built in {built - began:.1f} s, installed on "
          f"{', '.join(NODES)} in {ready - built:.1f} s")  # fmt: skip
    lines = (EXAMPLES / "slurm" / "slurm.conf").read_text().splitlines()
    packaged = "".join(line.replace("/etc/slurm", PACKAGED).replace("=300", f"={HEALTH_INTERVAL}")
                       + "\n" for line in lines if not line.startswith("#"))  # fmt: skip
    assert packaged.count(f"{PACKAGED}/gpurig-") == 3, packaged
    # The Prolog first: a health check between the drift and the job would drain the node
    # before the job reaches it.
    set_slurm_conf(installed, "".join(line + "\n" for line in packaged.splitlines()
                                      if line.startswith(("Prolog=", "Epilog="))))  # fmt: skip
    try:
        wait_for("nodes idle", lambda: all(node_state(ctl, n) == ("IDLE", None) for n in NODES))
        job = refused_and_drained(installed, NODES[0], "packaged")
        set_slurm_conf(installed, packaged)
        inventory = write_inventory(installed, tmp_path / "inventory.yaml",
                                    dict.fromkeys(NODES, SPEC))  # fmt: skip
        drained = time.monotonic()
        fixed_and_resumed(installed, NODES[0], inventory, job, "packaged")
        print(f"drained in {drained - ready:.1f} s, fixed, resumed and the job ran in "
              f"{time.monotonic() - drained:.1f} s")  # fmt: skip
    finally:
        set_slurm_conf(installed, "")
        for name in NODES:
            resume(ctl, name)


@pytest.mark.disruptive
def test_a_plain_up_repairs_a_killed_slurm_node(cluster: Sandbox) -> None:
    """`up` without --slurm keeps the cluster it made: a removed node comes back configured."""
    rec = cluster.state.hosts[NODES[1]]
    subprocess.run(["podman", "rm", "--force", "--time", "0", rec.container],
                   env={**os.environ, **cluster.paths.podman_env()}, check=True,
                   capture_output=True)  # fmt: skip
    proc = cluster.cli("up", "--fleet", "0", "--full", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "idle in sinfo" in proc.stdout
    ctl = node(cluster, CONTROLLER)
    wait_for("node back", lambda: node_state(ctl, NODES[1])[0] == "IDLE")
    assert sh(node(cluster, NODES[1]), f"id -u {USER}").strip() == str(slurm.UID)
