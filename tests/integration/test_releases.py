"""The release matrix: Debian 11 (bullseye) and 13 (trixie) hosts beside the session's Debian 12
ones (`gpurig sandbox up --release`), each release's hosts started once for all its tests (and
the node agent's, test_node_py39.py) and removed after (`down --release`). On each: the full
spec converged on a Docker host and a Podman host (engine, NVIDIA toolkit from the sandbox's apt
repository, a container by digest, a repository with a pip-locked environment, secrets, core
dumps), a second converge with nothing to do, drift clean, hand-made changes caught by drift and
cleared by the converge; scope: user for a plain account; the node contracts on Debian 13, and
on Debian 11 (python3 3.9: the node agent only, tests/integration/test_node_py39.py) onboarding
saying what runs there, naming the release."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from support import ReleaseHosts, Sandbox, Upstream, finding_ids, gpurig, host_spec, remote
from test_change_table import OLD
from test_user_scope import install_gpurig, user_spec

from gpurig.remote.converge import converge
from gpurig.sandbox import users
from gpurig.sandbox.keys import public_key
from gpurig.sandbox.rootfs import RELEASES, host_name
from tests.lockproject import make_project

MATRIX = ["bullseye", "trixie"]
PODMAN_NUMBER, DOCKER_NUMBER = "1", "2"  # users live on host 1 of a release
USER = "alice"
CODE, PROJ = "/srv/rel-code", "/srv/rel-proj"
SECRET = "/root/.gpurig-rel-token"
WHEELS = {"alpha": ["1.0"], "keepme": ["2.0"]}


@dataclass
class Release:
    """One release's hosts, converged: their names and the inventory that declares them."""

    suite: str
    podman: str
    docker: str
    login: str  # the plain account on the Podman host (scope: user)
    inventory: Path

    @property
    def version(self) -> str:
        return RELEASES[self.suite]


def full_spec(box: Sandbox, kind: str, suite: str, refs: tuple[str, str], secret: Path) -> dict:
    """Everything the converge manages on a root host, as the session's change table has it."""
    code, proj = refs
    spec = host_spec(kind, box.state.images["train"])
    spec.update(
        gpu="auto",  # the sandbox inventory says absent; auto installs the toolkit all the same
        core_dumps="disabled",
        packages=["curl", "tmux", "python3-venv"],
        nvidia_toolkit=box.toolkit(OLD),
        repos={CODE: {"url": f"{box.git_url}/rel-code-{suite}.git", "ref": code},
               PROJ: {"url": f"{box.git_url}/rel-proj-{suite}.git", "ref": proj,
                      "python": {"manager": "pip", "lockfile": "requirements.txt"}}},
        secrets=[{"src": str(secret), "dest": SECRET}],
        cleanup={"ray_sessions": True, "core_files": True},
    )  # fmt: skip
    return spec


def drift(inventory: Path, host: str) -> tuple[int, set[str]]:
    """drift's exit code and the error ids it reports for `host`."""
    proc = gpurig("drift", str(inventory), "--limit", host, "--format", "json")
    [report] = json.loads(proc.stdout)["hosts"]
    assert report["reachable"], proc.stderr
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    return proc.returncode, finding_ids(errors)


@pytest.fixture(scope="module", params=MATRIX)
def release(
    request: pytest.FixtureRequest,
    sandbox: Sandbox,
    release_hosts: ReleaseHosts,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Release]:
    """The release's two full hosts and a plain account, converged once with the full spec
    (and the user's); the hosts are shared with the node agent's tests (conftest.py)."""
    suite = request.param
    release_hosts.hold(suite)
    try:
        yield converged(sandbox, suite, tmp_path_factory.mktemp(suite))
    finally:
        release_hosts.done(suite, __name__)


def converged(box: Sandbox, suite: str, tmp: Path) -> Release:
    secret = tmp / "token"
    secret.write_text(f"token-{suite}-0123456789\n")
    podman, docker = (host_name("full", n, suite) for n in (PODMAN_NUMBER, DOCKER_NUMBER))
    home = box.state.hosts[podman]
    users.ensure(home, users.Account(USER), public_key(box.paths.client_key),
                 box.paths.podman_env())  # fmt: skip
    login = users.host_name(podman, USER)
    code = Upstream(box, tmp / "code", f"rel-code-{suite}")
    (code.work / "run.sh").write_text("#!/bin/sh\necho ok\n")
    proj = Upstream(box, tmp / "proj", f"rel-proj-{suite}")
    make_project(proj.work, {"alpha": "1.0", "keepme": "2.0"}, WHEELS, f"{PROJ}/wheels")
    alice = Upstream(box, tmp / "alice", f"rel-alice-{suite}")
    (alice.work / "train.py").write_text("print('train')\n")
    refs = code.commit("first"), proj.commit("locked")
    specs = {name: full_spec(box, kind, suite, refs, secret)
             for name, kind in ((docker, "docker"), (podman, "podman"))}  # fmt: skip
    specs[login] = user_spec(box, (alice, alice.commit("first")))
    inventory = yaml.safe_load(box.paths.inventory.read_text())
    inventory["hosts"][login] = {"address": home.address, "groups": ["full"],
                                 "ssh": {"user": USER, "host_key": home.host_key}}  # fmt: skip
    for name, spec in specs.items():
        inventory["hosts"][name]["spec"] = spec
    path = tmp / "inventory.yaml"
    path.write_text(yaml.safe_dump(inventory))
    for name in (docker, podman):
        remote(box, name).check_output("mkdir -p /srv/data")
    first = converge([path], limit=[docker, podman])
    assert first.returncode == 0, first.stderr[-4000:]
    assert set(first.changed["Containers | Container train"]) == {docker, podman}
    user = converge([path], limit=[login])
    assert user.returncode == 0, user.stderr[-4000:]
    return Release(suite, podman, docker, login, path)


def test_the_hosts_run_their_release(sandbox: Sandbox, release: Release):
    for name in (release.podman, release.docker):
        shell = remote(sandbox, name)
        assert shell.system_info.release.split(".")[0] == release.version
        # Debian 13's systemd 257 boots to `degraded` in a container: only the kernel modules
        # it cannot load; sshd answers all the same (what `up` waits for).
        state = shell.run("systemctl is-system-running --wait").stdout.strip()
        assert state in {"running", "degraded"}
        failed = shell.check_output("systemctl list-units --failed --plain --no-legend")
        assert {line.split()[0] for line in failed.splitlines()} <= {"systemd-modules-load.service"}


def test_a_second_converge_changes_nothing_and_drift_is_clean(release: Release):
    hosts = [release.docker, release.podman, release.login]
    again = converge([release.inventory], limit=hosts)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.change_count == 0, again.changed
    for name in hosts:
        assert drift(release.inventory, name) == (0, set()), name


def test_the_engines_run_the_container_by_digest(sandbox: Sandbox, release: Release):
    digest = sandbox.state.images["train"].split("@")[1]
    for name, engine in ((release.docker, "docker"), (release.podman, "podman")):
        shell = remote(sandbox, name)
        # The engine's own command: Debian 13's docker.io alone leaves none (docker-cli).
        info = json.loads(shell.check_output(f"{engine} container inspect train"))[0]
        assert info["State"]["Running"] is True
        assert digest in json.dumps(info)
        assert info["HostConfig"]["ShmSize"] == 8 << 30
        assert shell.check_output(f"{engine} exec train sh -c 'ulimit -c'") == "0"
    venv = remote(sandbox, release.docker)
    assert venv.check_output(f"{PROJ}/.venv/bin/python -c 'import alpha; print(alpha.__version__)'")
    assert venv.file(SECRET).mode == 0o600
    assert venv.package("nvidia-container-toolkit").version == OLD


MUTATIONS = {
    # host role: (hand-made change, the error ids drift must report)
    "docker": (["apt-get remove -y -qq tmux >/dev/null", f"chmod 0644 {SECRET}",
                "docker rm -f train >/dev/null"],
               {"packages.missing", "secret.mode", "container.missing"}),
    "podman": ([f"rm -f {SECRET}", "systemctl stop podman.socket",
                "rm /etc/containers/registries.conf.d/90-gpurig.conf"],
               {"secret.missing", "engine.socket", "engine.registries"}),
}  # fmt: skip


@pytest.mark.parametrize("role", list(MUTATIONS))
def test_hand_made_changes_are_caught_then_fixed(sandbox: Sandbox, release: Release, role: str):
    name = release.docker if role == "docker" else release.podman
    commands, ids = MUTATIONS[role]
    shell = remote(sandbox, name)
    for command in commands:
        shell.check_output(command)
    code, found = drift(release.inventory, name)
    assert code == 1 and ids <= found, found
    fixed = converge([release.inventory], limit=[name])
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert drift(release.inventory, name) == (0, set())


def test_user_scope_for_a_plain_account(sandbox: Sandbox, release: Release):
    """alice's rootless Podman serves her container; a second converge has nothing to do."""
    again = converge([release.inventory], limit=[release.login])
    assert again.returncode == 0 and again.change_count == 0, again.changed
    proc = gpurig("drift", str(release.inventory), "--limit", release.login, "--format", "json")
    assert proc.returncode == 0, proc.stdout
    alice = remote(sandbox, release.podman)
    assert "password is required" in alice.run(f"su - {USER} -c 'sudo -n true 2>&1'").stdout
    ps = alice.check_output(f"su - {USER} -c 'podman ps --format {{{{.Names}}}}'")
    assert "runtime" in ps.split()


NODE_SPEC = "/root/rel-node.yaml"


def test_the_node_contracts_run_where_the_releases_python_can(
    sandbox: Sandbox, release: Release, tmp_path: Path
):
    """gpurig on the node as root: where the release's python3 runs the full install (Debian
    13), the contracts judge the converged host clean and a missing package as drift; where it
    runs only the node agent (Debian 11, tests/integration/test_node_py39.py), onboarding says
    so for that release, and the python3 there is what it says."""
    shell = remote(sandbox, release.podman)
    python = shell.check_output("python3 -c 'import sys; print(*sys.version_info[:2], sep=\".\")'")
    onboarded = onboard_preflight(sandbox, release, tmp_path)
    if release.suite == "bullseye":
        assert python == "3.9"
        said = ("Debian GNU/Linux 11 (bullseye)'s python3 is 3.9: the node agent runs there "
                "(drift --local: Prolog, HealthCheckProgram, NPD), up --local needs the full "
                "install's 3.11")  # fmt: skip
        assert re.search(rf"^warn\s+os\s+.*{re.escape(said)}", onboarded, re.M), onboarded
        return
    assert re.search(r"^ok\s+os\s+Debian GNU/Linux 13 \(trixie\) \(converged", onboarded, re.M)
    install_gpurig(sandbox, release.podman, same_python=False)
    # A missing package drains here (its default is to report), so the Prolog refuses the job.
    spec = {"core_dumps": "disabled", "packages": ["curl", "tmux"], "gpu": "absent",
            "node_contracts": {"actions": {"packages.missing": "drain"}}}  # fmt: skip
    for packages, code, npd in ((["curl", "tmux"], 0, "ok"), (["gpurig-rel-absent"], 1, "")):
        spec["packages"] = packages
        shell.check_output(f"printf %s {shlex.quote(yaml.safe_dump(spec))} > {NODE_SPEC}")
        table = shell.run(f"gpurig drift --local --spec {NODE_SPEC}")
        assert table.rc == code, table.stdout + table.stderr
        plugin = shell.run(f"gpurig drift --local --spec {NODE_SPEC} --mode npd")
        line = plugin.stdout.strip()
        assert plugin.rc == code and len(line) <= 80 and "\n" not in line, plugin.stdout
        assert npd in line
        prolog = shell.run(f"gpurig drift --local --spec {NODE_SPEC} --mode prolog")
        assert (prolog.rc == 0) is (code == 0), prolog.stdout + prolog.stderr


def onboard_preflight(box: Sandbox, release: Release, tmp_path: Path) -> str:
    """`gpurig onboard` of the release's Docker host, as a fresh rental under a new name: its
    preflight report (the `os` line names the release and what it cannot do)."""
    inventory = yaml.safe_load(box.paths.inventory.read_text())
    inventory["groups"]["full"]["spec"]["checks"] = {"disk_free_min": "1g",
                                                     "inodes_free_min_pct": 1}  # fmt: skip
    entry = inventory["hosts"].pop(release.docker)
    path = tmp_path / "onboard.yaml"
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    argv = ["onboard", entry["address"], "--name", f"rel-{release.suite}", "--inventory",
            str(path), "--group", "full", "--key", str(box.paths.client_key), "--yes"]  # fmt: skip
    proc = gpurig(*argv)
    return proc.stdout + proc.stderr
