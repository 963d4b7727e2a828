"""scope: user on a real sandbox host, as the cluster user of field notes 001: `alice` on
full-1, without sudo rights, with subuid/subgid and the node's Podman (`gpurig sandbox up
--user alice`, made only for these tests). Over SSH as alice: the converge, drift clean, a
second converge with nothing to do, and a change table of hand-made changes to what a user
owns, each caught by drift and cleared by the converge. On the host as alice (`su - alice`,
gpurig installed there as a cluster's admins would): the job line `ready=$(gpurig up --local
...)`, a container started through DOCKER_HOST, and a node refused for a job it cannot
serve. validate refuses root-only items for alice's host, naming each."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from support import FLEET, FULL, REPO_ROOT, Sandbox, Upstream, gpurig, write_inventory

from gpurig.remote.converge import converge

USER, HOST = "alice", "full-1"
LOGIN = f"{HOST}-{USER}"  # the sandbox inventory's entry for alice (scope: user)
CODE = f"/home/{USER}/code"
SUPERVISED = "/tmp/podman-run-$(id -u)"
# An ELF header of type ET_CORE (what cleanup removes), written by the user.
ELF_CORE = (
    r"printf '\177ELF\002\001\001\000\000\000\000\000\000\000\000\000\004\000' > /tmp/core.4242"
)

# The hosts the converge tests start from bare come first; alice's home is her own.
pytestmark = pytest.mark.late


def ssh(box: Sandbox, login: str, script: str, stdin: bytes | None = None) -> str:
    """Run `script` over SSH as `login` (an ssh_config entry); its stdout, or fail."""
    done = subprocess.run(
        ["ssh", "-F", str(box.paths.ssh_config), login, script],
        input=stdin, capture_output=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, (script, done.stderr.decode(errors="replace")[-2000:])
    return done.stdout.decode()


def as_alice_on_host(box: Sandbox, script: str) -> subprocess.CompletedProcess[str]:
    """`su - alice -c SCRIPT` on the host, in the bare environment a batch job has (no
    XDG_RUNTIME_DIR, the system PATH)."""
    job = (
        f"env -i HOME=/home/{USER} PATH=/usr/local/bin:/usr/bin:/bin bash -c {shlex.quote(script)}"
    )
    argv = ["ssh", "-F", str(box.paths.ssh_config), HOST, f"su - {USER} -c {shlex.quote(job)}"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def install_gpurig(box: Sandbox, host: str = HOST, same_python: bool = True) -> None:
    """gpurig on the host for every user, as a cluster's admins would install it: this
    environment's packages (the same Debian and Python) and the sources, in /opt/gpurig.
    Without `same_python` (another release's python3) only the pure-Python packages load
    there: enough for the node contracts, which need no compiled one."""
    version = ssh(box, host, "python3 -c 'import sys; print(*sys.version_info[:2])'").split()
    if same_python:
        assert version == [str(n) for n in sys.version_info[:2]], f"host python {version}"
    site = Path(sysconfig.get_paths()["purelib"])
    packed = subprocess.run(
        ["tar", "-C", str(site.parent), "--exclude=*.pth", "--exclude=__pycache__", "-cf", "-",
         site.name], capture_output=True, check=True,
    ).stdout  # fmt: skip
    ssh(box, host, "rm -rf /opt/gpurig && mkdir -p /opt/gpurig/src && tar -C /opt/gpurig -xf - "
        f"&& mv /opt/gpurig/{site.name} /opt/gpurig/site", packed)  # fmt: skip
    sources = subprocess.run(
        ["tar", "-C", str(REPO_ROOT), "--exclude=__pycache__", "-cf", "-", "gpurig", "deploys",
         "facts", "schemas", "inventory.py"], capture_output=True, check=True,
    ).stdout  # fmt: skip
    wrapper = '#!/bin/sh\nPYTHONPATH=/opt/gpurig/src:/opt/gpurig/site exec python3 -m gpurig "$@"\n'
    ssh(box, host, "tar -C /opt/gpurig/src -xf - && python3 -m compileall -q /opt/gpurig "
        f">/dev/null && printf %s {shlex.quote(wrapper)} > /usr/local/bin/gpurig && "
        "chmod 755 /usr/local/bin/gpurig", sources)  # fmt: skip


@pytest.fixture(scope="module")
def alice(sandbox: Sandbox) -> Sandbox:
    """The session's sandbox with alice on full-1 (kept by later ups), not lingering:
    gpurig supervises her Podman service itself until a row turns lingering on."""
    proc = sandbox.cli("up", "--fleet", str(FLEET), "--full", str(FULL), "--user", USER)
    assert proc.returncode == 0, proc.stderr
    inventory = yaml.safe_load(sandbox.paths.inventory.read_text())
    assert inventory["hosts"][LOGIN]["ssh"]["user"] == USER
    assert inventory["hosts"][LOGIN]["spec"] == {"scope": "user"}
    assert "password is required" in as_alice_on_host(sandbox, "sudo -n true 2>&1").stdout
    ssh(sandbox, HOST, f"loginctl disable-linger {USER}")
    install_gpurig(sandbox)
    return sandbox


@pytest.fixture(scope="module")
def upstream(alice: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> tuple[Upstream, str]:
    repo = Upstream(alice, tmp_path_factory.mktemp("alice-code"), "alice-code")
    (repo.work / "train.py").write_text("print('train')\n")
    return repo, repo.commit("first")


def user_spec(box: Sandbox, upstream: tuple[Upstream, str]) -> dict:
    """What the field note's user declares: the rootless Podman socket with DOCKER_HOST, a
    sandbox runtime container through it, code in the home directory, leftovers cleaned,
    core dumps off."""
    image = box.state.images["train"]
    repo, pin = upstream
    return {
        "scope": "user",
        "engine": "podman",
        "gpu": "auto",
        "core_dumps": "disabled",
        "insecure_registries": [image.split("/", 1)[0]],
        "containers": {"runtime": {"image": image, "network": "host",
                                   "command": ["sleep", "infinity"],
                                   "ulimits": {"nofile": "1024:20000", "nproc": "4096:4096"}}},
        "repos": {CODE: {"url": repo.url, "ref": pin}},
        "cleanup": {"core_files": True, "ray_sessions": True},
    }  # fmt: skip


def drift(inventory: Path) -> tuple[int, set[str]]:
    proc = gpurig("drift", str(inventory), "--limit", LOGIN, "--format", "json")
    report = json.loads(proc.stdout)
    assert report["hosts"][0]["reachable"], report
    return proc.returncode, {f["id"] for f in report["hosts"][0]["findings"]}


# Root's configuration directories, as `ls -l` shows them (names, owners, mtimes).
ROOT_FILES = "ls -l --time-style=+%s /etc/profile.d /etc/security/limits.d /etc/containers"
ROOT_BEFORE: list[str] = []


@pytest.fixture(scope="module")
def inventory(
    alice: Sandbox, upstream: tuple[Upstream, str], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    spec = user_spec(alice, upstream)
    path = write_inventory(alice, tmp_path_factory.mktemp("alice") / "inv.yaml", {LOGIN: spec})
    ssh(alice, LOGIN, f"printf %s {shlex.quote(yaml.safe_dump(spec))} > node.yaml")
    before = drift(path)
    assert before[0] == 1 and {"engine.user_service", "engine.docker_host", "repo.missing",
                               "core_dumps.profile", "engine.registries"} <= before[1]  # fmt: skip
    ROOT_BEFORE.append(ssh(alice, HOST, ROOT_FILES))
    first = converge([path], limit=[LOGIN])
    assert first.returncode == 0, first.stderr[-3000:]
    return path


def test_converge_as_the_user_then_drift_clean_then_nothing_to_do(alice: Sandbox, inventory):
    assert drift(inventory) == (0, set())
    again = converge([inventory], limit=[LOGIN])
    assert again.returncode == 0 and again.change_count == 0, again.changed
    # Nothing of root's was touched (a system-scope test may have converged full-1 before:
    # its files are compared, names and mtimes, with what was there before alice's converge).
    assert ssh(alice, HOST, ROOT_FILES) == ROOT_BEFORE[0]
    status = ssh(alice, LOGIN, f"cat {SUPERVISED}/gpurig-podman.pid; "
                 "pgrep -u alice -fc '[s]ystem service --time=0'")  # fmt: skip
    pid, count = status.split()
    assert int(pid) > 0 and count in ("1", "2")  # podman re-executes itself in its namespace


@dataclass
class Row:
    """Hand changes (as alice, or as root: lingering), the ids drift must then report, and
    what must hold once the converge has run."""

    change: list[str]
    ids: set[str]
    root: list[str] = field(default_factory=list)
    check: list[str] = field(default_factory=list)  # as alice, each must succeed
    exit_code: int = 1  # leftovers are warnings: drift exits 0


def until(condition: str, seconds: int = 60) -> str:
    """A command that returns once the shell test `condition` holds (a row's hand change waits
    for what it caused, not for a guessed time), failing after `seconds`."""
    return f"timeout {seconds} sh -c {shlex.quote(f'until {condition}; do sleep 0.1; done')}"


SOCKET = f"{SUPERVISED}/podman/podman.sock"
SERVICE = "'[s]ystem service --time=0'"  # as pgrep -f matches it, and not this line's own shell
SERVICE_GONE = until(f"! pgrep -u {USER} -f {SERVICE} >/dev/null")
# Lingering off, as the reader sees it: logind's flag file gone. (The user's manager need not
# stop: in the sandbox it was still active 60 s later, so the row waits on the flag alone.)
LINGER_OFF = until(f"[ ! -e /var/lib/systemd/linger/{USER} ]")
LINGERING = "/run/user/$(id -u)/podman/podman.sock"
RUNTIME_UP = "podman --remote ps --format '{{.Names}}' | grep -qx runtime"
PING = '[ "$(curl -s --max-time 5 --unix-socket {} http://d/_ping)" = OK ]'
ROWS: dict[str, Row] = {
    # Every process of the service: podman re-executes itself in its user namespace, and the
    # child, not the pid file's parent, serves the socket (killing the parent alone left the
    # socket answering in some runs).
    "socket stopped": Row([f"pkill -u alice -f {SERVICE}", SERVICE_GONE],
                          {"engine.user_service"}, check=[PING.format(SOCKET)]),
    "stale socket file": Row(
        [f"pkill -KILL -u alice -f {SERVICE}", SERVICE_GONE, f"test -S {SOCKET}"],
        {"engine.user_service"}, check=[PING.format(SOCKET), RUNTIME_UP]),
    "DOCKER_HOST line removed": Row(
        ["sed -i '/^DOCKER_HOST=/d' ~/.profile"], {"engine.docker_host"},
        check=[f"[ \"$(bash -lc 'echo $DOCKER_HOST')\" = unix://{SOCKET} ]"]),
    "profile core line removed": Row(
        ["sed -i '/^ulimit -S -c 0/d' ~/.profile"], {"core_dumps.profile"},
        check=["[ \"$(bash -lc 'ulimit -c')\" = 0 ]"]),
    "checkout moved": Row([f"mv {CODE} {CODE}.moved"], {"repo.missing"},
                          check=[f"test -d {CODE}.moved/.git", f"git -C {CODE} status --short"]),
    "leftovers planted": Row(
        [ELF_CORE, "mkdir -p /tmp/ray/session_a /tmp/ray/session_b",
         "ln -sfn /tmp/ray/session_b /tmp/ray/session_latest"],
        {"cleanup.core_files", "cleanup.ray_sessions"}, exit_code=0,
        root=[ELF_CORE.replace("4242", "7777")],  # root's: not the user's business
        check=["! test -e /tmp/core.4242", "! test -e /tmp/ray/session_a",
               "test -d /tmp/ray/session_b", "test -e /tmp/core.7777"]),
    "lingering turned on": Row(
        [], {"engine.socket", "engine.user_service"}, root=[f"loginctl enable-linger {USER}"],
        check=["XDG_RUNTIME_DIR=/run/user/$(id -u) systemctl --user is-active podman.socket",
               f'! pgrep -u alice -f "[u]nix://{SUPERVISED}"',
               PING.format(LINGERING),
               f"[ \"$(bash -lc 'echo $DOCKER_HOST')\" = unix://{LINGERING} ]"]),
    "lingering turned off": Row(
        [], {"engine.user_service"}, root=[f"loginctl disable-linger {USER}", LINGER_OFF],
        check=[PING.format(SOCKET), RUNTIME_UP]),
}  # fmt: skip


@pytest.mark.parametrize("label", list(ROWS))
def test_change_table(alice: Sandbox, inventory: Path, label: str):
    row = ROWS[label]
    for command in row.root:
        ssh(alice, HOST, command)
    for command in row.change:
        ssh(alice, LOGIN, command)
    assert drift(inventory) == (row.exit_code, row.ids)
    done = converge([inventory], limit=[LOGIN])
    assert done.returncode == 0, done.stderr[-3000:]
    assert drift(inventory) == (0, set())
    for command in row.check:  # podman through the socket a login shell is given
        ssh(alice, LOGIN, f"export CONTAINER_HOST=$(bash -lc 'echo $DOCKER_HOST'); {command}")


def test_a_job_gets_its_node_ready_in_one_line(alice: Sandbox, inventory: Path):
    """The seed's manual steps as one line of a job script, run as alice on the host: then
    plain `podman --remote` and Docker's API reach her socket through DOCKER_HOST."""
    image = alice.state.images["train"]
    ssh(alice, LOGIN, f"kill $(cat {SUPERVISED}/gpurig-podman.pid)")  # a new job, no service
    job = (
        'ready=$(gpurig up --local --spec ~/node.yaml) && eval "$ready" && '
        "CONTAINER_HOST=$DOCKER_HOST podman --remote run --rm --network host "
        f"{image} echo hello from a job && "
        'curl -s --unix-socket "${DOCKER_HOST#unix://}" http://d/v1.41/containers/json'
    )
    done = as_alice_on_host(alice, job)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "hello from a job"
    assert [c["Names"] for c in json.loads(lines[1])] == [["/runtime"]]
    assert "gpurig up: converging" in done.stderr and "ready (converged)" in done.stderr
    # A converged node: stdout is the export lines alone, and the line costs little.
    began = time.monotonic()
    noop = as_alice_on_host(alice, "time gpurig up --local --spec ~/node.yaml")
    took = time.monotonic() - began
    assert noop.returncode == 0, noop.stderr
    assert noop.stdout.splitlines() == [
        f"export DOCKER_HOST=unix:///tmp/podman-run-{uid(alice)}/podman/podman.sock",
        f"export CONTAINER_HOST=unix:///tmp/podman-run-{uid(alice)}/podman/podman.sock",
    ]
    assert "already as declared" in noop.stderr
    print(f"gpurig up on a converged node: {noop.stderr.strip().splitlines()[-3:]}; "
          f"{took:.2f} s with su and ssh")  # fmt: skip
    assert took < 10


def uid(box: Sandbox) -> str:
    return ssh(box, LOGIN, "id -u").strip()


def test_a_node_that_cannot_serve_the_job_is_refused_in_one_line(alice: Sandbox, inventory):
    ssh(alice, LOGIN, "sed 's/^gpu: auto$/gpu: required/' node.yaml > gpu-node.yaml")
    done = as_alice_on_host(alice, "gpurig up --local --spec ~/gpu-node.yaml")
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"gpurig up: {HOST} cannot serve this job: gpu.missing: ")


def test_drift_local_as_the_user(alice: Sandbox, inventory: Path):
    done = as_alice_on_host(alice, "gpurig drift --local --spec ~/node.yaml --format json")
    assert done.returncode == 0, done.stdout + done.stderr
    [host] = json.loads(done.stdout)["hosts"]
    assert host["findings"] == []  # no host.not_root: a user reads as itself by design


def test_another_accounts_runtime_directory_is_said_alike_everywhere(alice: Sandbox, inventory):
    """Another account made alice's runtime directory: drift explains it (engine.user_service),
    and the converge and `gpurig up --local` say it in the same words (they said `exit 1, said
    ''; flock?` and `could not take this node's converge lock (exit 1)`)."""
    run = f"/tmp/podman-run-{uid(alice)}"
    ssh(alice, HOST, f"mv {run} {run}.aside && install -d -m 755 {run}")  # root's, not hers
    try:
        proc = gpurig("drift", str(inventory), "--limit", LOGIN, "--format", "json")
        [host] = json.loads(proc.stdout)["hosts"]
        [found] = [f for f in host["findings"] if f["id"] == "engine.user_service"]
        assert (proc.returncode, found["actual"]) == (1, "a directory of uid 0")
        words = f"expected {found['expected']}; found {found['actual']}; [by-hand] {found['fix']}"
        done = converge([inventory], limit=[LOGIN])
        assert done.returncode != 0 and words in done.stderr, done.stderr[-3000:]
        assert "flock?" not in done.stderr
        up = as_alice_on_host(alice, "gpurig up --local --spec ~/node.yaml")
        assert (up.returncode, up.stdout) == (1, "")
        [line] = up.stderr.splitlines()
        assert words in line, line
    finally:
        ssh(alice, HOST, f"rm -rf {run} && mv {run}.aside {run}")
    assert drift(inventory) == (0, set())


def test_validate_refuses_root_only_items_for_the_user(alice: Sandbox, tmp_path: Path):
    spec = {"scope": "user", "engine": "docker", "packages": ["tmux"],
            "nvidia_toolkit": {"version": "1.17.8-1"}, "driver": {"version": "580.95.05",
            "hold": True}}  # fmt: skip
    path = write_inventory(alice, tmp_path / "inv.yaml", {LOGIN: spec})
    done = gpurig("validate", str(path))
    assert done.returncode == 2
    refused = [line.split(": ")[1] for line in done.stderr.splitlines()]
    assert refused == [f"hosts.{LOGIN}.spec.{key}" for key in
                       ("driver.hold", "engine", "nvidia_toolkit", "packages")]  # fmt: skip
    assert all("refused with scope: user" in line for line in done.stderr.splitlines())
