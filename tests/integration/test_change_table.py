"""The change table: on real Docker and Podman hosts converged with a full spec, hand-made
changes of every kind the converge manages. For each: `gpurig drift` exits 1 naming its id,
the converge clears it (or refuses, with the reason, and changes nothing), and drift is clean
after: every error drift reports after a converge that the converge cannot fix is one the
converge said (a refusal, or an error of what it manages), and one that exits 0 leaves none.
Things that are not drift stay quiet. Every change id the plans can emit has a row here or a
stated reason why only the unit table (tests/unit/test_plans.py) can make it fire."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support import Sandbox, Upstream, finding_ids, gpurig, host_spec, remote, write_inventory
from test_user_scope import ROWS as USER_ROWS

from gpurig.checks import managed
from gpurig.checks.all import CHECK_IDS
from gpurig.plans import CHANGE_IDS
from gpurig.plans.compose import PLUGIN
from gpurig.plans.core_dumps import MANAGED_FILES
from gpurig.plans.driver import UNATTENDED
from gpurig.plans.engine import DOCKER_HOST_PROFILE, PODMAN_REGISTRIES
from gpurig.plans.toolkit import KEYRING, OCI_HOOK, SOURCES_LIST, packages
from gpurig.remote.converge import ConvergeResult, converge
from gpurig.sandbox import aptrepo

DOCKER, PODMAN, POD = "full-2", "full-3", "fleet-002"
CODE = "/srv/table"
SECRET_A, SECRET_B = "/root/.gpurig-table-a", "/root/.gpurig-table-b"
OLD, NEW = aptrepo.VERSIONS
DRIVER_OLD, DRIVER_NEW = aptrepo.DRIVER_VERSIONS
COMPOSE_OLD, COMPOSE_NEW = aptrepo.COMPOSE_VERSIONS
DRIVER_PACKAGES = " ".join(aptrepo.DRIVER_PACKAGES)
# An ELF header of type ET_CORE (what cleanup removes) and a text file merely named like one.
ELF_CORE = (
    r"printf '\177ELF\002\001\001\000\000\000\000\000\000\000\000\000\004\000' > /tmp/core.4242"
)
NAMED_LIKE_A_CORE = "echo 'notes, not a core' > /tmp/core.7"

# The hosts the converge and toolkit tests start from bare: this table changes them by hand.
pytestmark = pytest.mark.late

# Ids the sandbox cannot make fire on a real host, and why; the unit table covers them.
UNIT_ONLY = {
    "toolkit.cdi": "nvidia-ctk cdi generate needs an NVIDIA driver and GPU",
    "container.gpus": "a container given GPUs cannot start on a host without one",
    "cleanup.editable_finders": "needs a venv with a stale finder: tests/unit/test_code_facts",
    "cleanup.flashinfer_cache": "needs flashinfer installed: tests/unit/test_code_facts",
    "repo.env": "a locked environment is converged on fleet-001 in test_code.py",
    "tools.missing": "scope: user lacking podman, curl or git; the sandbox node has them",
    "engine.rootless": "scope: user without a subuid range; the sandbox's user has one",
    "repo.writable": "a checkout another uid owns, and one under /tmp, refused before anything "
    "runs there: tests/unit/test_code_facts.py (real git and RepoState, as root)",
    "repo.credential": "an origin holding user:token@ needs an HTTP remote that asks for it; the "
    "sandbox's git daemon takes none: tests/unit/test_repo_credentials.py (a real HTTP server)",
}


# Findings a hand change may bring along besides its own (a login shell re-reads profile.d).
ALSO = {"core_dumps.login_shell", "engine.api"}


@dataclass
class Row:
    """Hand changes on one host, the error ids drift must then report, and what follows."""

    host: str
    change: list[str]
    ids: set[str]
    refused: str | None = None  # a pattern the refusal must print
    restore: list[str] = field(default_factory=list)  # the user's own fix, after the refusal
    opt_in: dict[str, str] | None = None  # converge data that lets it through
    spec: Callable[[dict[str, Any]], None] | None = None  # an inventory edit instead
    kept: list[str] = field(default_factory=list)  # must hold after a refusal: nothing lost
    check: list[str] = field(default_factory=list)  # must hold at the end


@pytest.fixture(scope="module")
def upstream(
    sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Upstream, str, str]:
    """Two commits: the first with a CRLF script, the second (the pin) with it fixed."""
    repo = Upstream(sandbox, tmp_path_factory.mktemp("table"), "table")
    (repo.work / "run.sh").write_bytes(b"#!/bin/sh\r\necho one\r\n")
    (repo.work / "train.py").write_text("print('train')\n")
    first = repo.commit("first")
    (repo.work / "run.sh").write_bytes(b"#!/bin/sh\necho two\n")
    return repo, first, repo.commit("second")


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    top = tmp_path_factory.mktemp("secrets")
    paths = {"a": top / "a", "b": top / "b"}
    for name, path in paths.items():
        path.write_text(f"token-{name}-0123456789\n")
    return paths


def full_spec(sandbox: Sandbox, kind: str, upstream: tuple, secrets: dict[str, Path]) -> dict:
    repo, _, pin = upstream
    spec = host_spec(kind, sandbox.state.images["train"])
    apt = sandbox.apt_url
    spec.update(
        gpu="auto",  # the sandbox inventory says absent; auto installs the toolkit all the same
        packages=["curl", "tmux"],
        nvidia_toolkit=sandbox.toolkit(OLD),
        repos={CODE: {"url": repo.url, "ref": pin}},
        secrets=[{"src": str(secrets["a"]), "dest": SECRET_A},
                 {"src": str(secrets["b"]), "dest": SECRET_B, "mode": "0640", "owner": "root"}],
        cleanup={"ray_sessions": True, "core_files": True},
    )  # fmt: skip
    if kind == "docker":  # the host whose image came with a driver (see `specs`)
        compose = (apt_dir(sandbox) / aptrepo.compose_path(COMPOSE_OLD)).read_bytes()
        spec.update(
            driver={"version": DRIVER_OLD.split("-")[0]},
            compose={"version": COMPOSE_OLD, "sha256": hashlib.sha256(compose).hexdigest(),
                     "url": f"{apt}/{aptrepo.compose_path(COMPOSE_OLD)}"},
        )  # fmt: skip
    return spec


def apt_dir(sandbox: Sandbox) -> Path:
    return sandbox.top / "aptrepo" / "repo"


def install_driver(sandbox: Sandbox) -> str:
    """What a rental's image comes with: the (stand-in) driver packages, installed with dpkg
    before gpurig ever runs, so no apt source for them is left behind."""
    get = "import sys, urllib.request as u; u.urlretrieve(sys.argv[1], sys.argv[2])"
    pool = f"{sandbox.apt_url}/pool"
    fetch = " && ".join(f'python3 -c "{get}" {pool}/{p}_{DRIVER_OLD}_all.deb {p}.deb'
                        for p in aptrepo.DRIVER_PACKAGES)  # fmt: skip
    return f'cd "$(mktemp -d)" && {fetch} && dpkg -i ./*.deb >/dev/null'


@pytest.fixture(scope="module")
def specs(sandbox: Sandbox, upstream: tuple, secrets: dict[str, Path]) -> dict[str, dict]:
    for name in (DOCKER, PODMAN):
        remote(sandbox, name).check_output("mkdir -p /srv/data")
    remote(sandbox, DOCKER).check_output(install_driver(sandbox))
    specs = {name: full_spec(sandbox, kind, upstream, secrets)
             for name, kind in ((DOCKER, "docker"), (PODMAN, "podman"))}  # fmt: skip
    return {**specs, POD: {"core_dumps": "disabled"}}


@pytest.fixture(scope="module")
def inventory(sandbox: Sandbox, specs: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = write_inventory(sandbox, tmp_path_factory.mktemp("table") / "inv.yaml", specs)
    hosts = [DOCKER, PODMAN, POD]
    first = converge([path], limit=hosts)
    assert first.returncode == 0, first.stderr[-3000:]
    again = converge([path], limit=hosts)
    assert again.returncode == 0 and again.change_count == 0, again.changed
    for name in hosts:
        assert clean(path, name) == (0, set()), name
    return path


def drift(inventory: Path, host: str) -> tuple[int, set[str]]:
    """The exit code and every finding id, the converge's own ids of a grouped finding
    included (cleanup leftovers are warnings: exit 0)."""
    proc = gpurig("drift", str(inventory), "--limit", host, "--format", "json")
    report = json.loads(proc.stdout)
    return proc.returncode, finding_ids(report["hosts"][0]["findings"])


def clean(inventory: Path, host: str) -> tuple[int, set[str]]:
    """drift's exit code and ids: a converged sandbox host has none, not even advice."""
    return drift(inventory, host)


def unsaid(inventory: Path, host: str, result: ConvergeResult) -> list[str]:
    """The errors drift reports right after a converge that the converge cannot fix and did
    not say: a change it refuses (`action: refused`) or an error of what it manages that no
    change of its own clears (gpurig.checks.managed). After a converge that exits 0, every
    such error; after one that fails, those whose subject its output does not name. (Changes
    a refusal kept it from making are the next converge's: drift says it fixes them.)"""
    proc = gpurig("drift", str(inventory), "--limit", host, "--format", "json")
    [report] = json.loads(proc.stdout)["hosts"]
    errors = [f for f in report["findings"] if f["severity"] == "error"
              and (f["action"] == "refused" or finding_ids([f]) & set(managed.IDS))]  # fmt: skip
    return [f"{f['id']} ({f['subject']})" for f in errors
            if result.returncode == 0 or f["subject"] not in result.stderr]  # fmt: skip


def sh(sandbox: Sandbox, host: str, commands: list[str]) -> None:
    shell = remote(sandbox, host)
    for command in commands:
        shell.check_output(command)


def rows(image: str, tag: str, url: str, first: str, pin: str, apt: str) -> dict[str, Row]:
    """The table, by label; built from the sandbox's image, the upstream's commits and the
    apt repository's URL."""
    drifted = (f"--shm-size 64m --user 0 --network bridge -e PYTHONUNBUFFERED=0 --restart no "
               f"{tag} sleep 1")  # fmt: skip
    return {
        "docker: packages, secrets, files, repo, engine, toolkit, leftovers": Row(
            DOCKER,
            [
                "apt-get remove -y -q tmux >/dev/null 2>&1",
                f"echo changed > {SECRET_A}",
                f"rm {SECRET_B}",
                f"rm {next(iter(MANAGED_FILES))}",
                f"rm -rf {CODE}",
                "systemctl stop docker.socket docker",
                """echo '{"log-level": "warn"}' > /etc/docker/daemon.json""",
                "apt-mark unhold nvidia-container-toolkit >/dev/null",
                f"rm {KEYRING}",
                ELF_CORE,
                NAMED_LIKE_A_CORE,
                "mkdir -p /tmp/ray/session_a /tmp/ray/session_b",
                "ln -sfn /tmp/ray/session_b /tmp/ray/session_latest",
            ],
            {
                "packages.missing",
                "secret.content",
                "secret.missing",
                "core_dumps.file",
                "repo.missing",
                "engine.service",
                "engine.insecure_registries",
                "toolkit.runtime",
                "toolkit.hold",
                "toolkit.keyring",
                "container.missing",
                "cleanup.core_files",
                "cleanup.ray_sessions",
            },
            check=[
                "test -f /tmp/core.7",
                "test ! -e /tmp/core.4242",
                "test ! -e /tmp/ray/session_a",
                """grep -q '"log-level": "warn"' /etc/docker/daemon.json""",
            ],
        ),
        "podman: socket, DOCKER_HOST, registries, OCI hook, toolkit, repo, stopped container": Row(
            PODMAN,
            [
                f"chmod 644 {SECRET_A}",
                f"chown nobody {SECRET_B}",
                "systemctl disable --now podman.socket podman.service",
                f"rm {DOCKER_HOST_PROFILE}",
                f"echo '# edited' >> {PODMAN_REGISTRIES}",
                f"mkdir -p {Path(OCI_HOOK).parent} && echo '{{}}' > {OCI_HOOK}",
                "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades "
                "--allow-change-held-packages "
                + " ".join(f"{p}={NEW}" for p in packages())
                + " >/dev/null 2>&1",
                f"rm {SOURCES_LIST}",
                f"rm {CODE}/.git/info/attributes",
                f"git -C {CODE} checkout -q --force --detach {first}",
                f"podman rm -f train >/dev/null && podman create --name train {drifted} >/dev/null",
            ],
            {
                "secret.mode",
                "secret.owner",
                "engine.socket",
                "engine.docker_host",
                "engine.registries",
                "toolkit.oci_hook",
                "toolkit.version",
                "toolkit.hold",  # apt lets go of the hold when it installs another version
                "toolkit.apt",
                "repo.attributes",
                "repo.ref",
                "repo.crlf",
                "container.image",
                "container.shm_size",
                "container.user",
                "container.network",
                "container.env",
                "container.restart",
                "container.command",
                "container.ulimits",
                "container.mounts",
            },
            check=[
                f'test "$(git -C {CODE} rev-parse HEAD)" = {pin}',
                f"! grep -q $'\\r' {CODE}/run.sh",
            ],
        ),
        "docker: driver hold, its unattended-upgrades file, compose plugin at another version": Row(
            DOCKER,
            [
                "apt-mark unhold nvidia-driver-580 >/dev/null",
                f"rm {UNATTENDED}",
                f"curl -fsS -o {PLUGIN} {apt}/{aptrepo.compose_path(COMPOSE_NEW)}",
            ],
            {"driver.hold", "driver.unattended", "compose.plugin"},
            check=[
                f'test "$(apt-mark showhold {DRIVER_PACKAGES} | wc -l)" = 2',
                "grep -q '\"nvidia-\";' " + UNATTENDED,
                f"docker compose version | grep -qx 'Docker Compose version v{COMPOSE_OLD}'",
            ],
        ),
        "docker: a driver that moved is refused; its packages are held again": Row(
            DOCKER,
            [
                "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-change-held-packages "
                + " ".join(f"{p}={DRIVER_NEW}" for p in aptrepo.DRIVER_PACKAGES)
                + " >/dev/null 2>&1",
            ],
            {"driver.version", "driver.hold"},  # apt lets go of a hold when it installs
            refused="never installs or replaces a kernel driver",
            kept=[
                f"dpkg-query -W -f='${{Version}}' nvidia-driver-580 | grep -qx {DRIVER_NEW}",
                f'test "$(apt-mark showhold {DRIVER_PACKAGES} | wc -l)" = 2',
            ],
            restore=[
                "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades "
                "--allow-change-held-packages "
                + " ".join(f"{p}={DRIVER_OLD}" for p in aptrepo.DRIVER_PACKAGES)
                + f" >/dev/null 2>&1 && apt-mark hold {DRIVER_PACKAGES} >/dev/null",
            ],
        ),
        "pod: a driver declared on a host without one is refused": Row(
            POD,
            [],
            {"driver.missing", "driver.unattended"},
            refused="never installs or replaces a kernel driver",
            spec=lambda s: s.update(driver={"version": "580.95.05"}),
            check=[f"grep -q Package-Blacklist {UNATTENDED}"],
        ),
        "docker: a stopped container is started": Row(
            DOCKER, ["docker stop -t 0 train >/dev/null"], {"container.not_running"}
        ),
        "docker: a running container with drift is refused, then recreated with the opt-in": Row(
            DOCKER,
            [
                f"docker rm -f train >/dev/null && docker run -d --name train --shm-size 64m "
                f"--user root --network host {image} sleep infinity >/dev/null"
            ],
            {
                "container.shm_size",
                "container.mounts",
                "container.ulimits",
                "container.env",
                "container.restart",
            },
            refused="stop its job first",
            kept=[
                "test \"$(docker inspect -f '{{.HostConfig.ShmSize}}' train)\" = 67108864",
                "test \"$(docker inspect -f '{{.State.Running}}' train)\" = true",
            ],
            opt_in={"allow_recreate": "true"},
            check=["test \"$(docker inspect -f '{{.HostConfig.ShmSize}}' train)\" = 8589934592"],
        ),
        "podman: uncommitted work in the checkout is refused and kept": Row(
            PODMAN,
            [f"echo '# my fix' >> {CODE}/train.py"],
            {"repo.dirty"},
            refused="no uncommitted changes",
            kept=[f"grep -q '# my fix' {CODE}/train.py"],
            restore=[f"git -C {CODE} checkout -- train.py"],
        ),
        "podman: a local commit is refused and kept": Row(
            PODMAN,
            [f"git -C {CODE} -c user.name=u -c user.email=u@u commit -q --allow-empty -m mine"],
            {"repo.local_commits"},
            refused="missing from the remote",
            restore=[f"git -C {CODE} checkout -q --detach {pin}"],
        ),
        "podman: another origin is refused": Row(
            PODMAN,
            [f"git -C {CODE} remote set-url origin git://elsewhere.invalid/x.git"],
            {"repo.origin"},
            refused="elsewhere.invalid",
            restore=[f"git -C {CODE} remote set-url origin {url}"],
        ),
        "podman: a directory that is not a checkout is refused and kept": Row(
            PODMAN,
            [f"mv {CODE} {CODE}.mine && mkdir {CODE} && touch {CODE}/notes"],
            {"repo.not_checkout"},
            refused="not one",
            kept=[f"test -f {CODE}/notes"],
            restore=[f"rm -r {CODE} && mv {CODE}.mine {CODE}"],
        ),
        "docker: daemon.json that is not JSON is refused and kept": Row(
            DOCKER,
            [
                "cp /etc/docker/daemon.json /root/daemon.json.good",
                "echo '{not json' > /etc/docker/daemon.json",
            ],
            {"engine.daemon_json"},
            refused="gpurig will not guess",
            kept=["grep -q '{not json' /etc/docker/daemon.json"],
            restore=["mv /root/daemon.json.good /etc/docker/daemon.json"],
        ),
        "docker: a missing secret source is refused before anything changes": Row(
            DOCKER,
            [],
            {"secret.source"},
            refused="every source exists",
            spec=lambda s: s["secrets"][0].update(src="/nonexistent/gpurig-token"),
        ),
        "docker: a lockfile missing at the pin is refused": Row(
            DOCKER,
            [],
            {"repo.lockfile_missing"},
            refused="without its lockfile",
            spec=lambda s: s["repos"][CODE].update(python={"lockfile": "uv.lock"}),
        ),
        "docker: gpu required on a host without one is refused": Row(
            DOCKER,
            [],
            {"toolkit.gpu", "gpu.missing"},
            refused="until a GPU answers",
            spec=lambda s: s.update(gpu="required"),
        ),
        "pod: an engine on a host without systemd is refused": Row(
            POD,
            [],
            {"engine.systemd"},
            refused="a pod should use engine: none",
            spec=lambda s: s.update(engine="docker"),
        ),
        "pod: containers without an engine are refused": Row(
            POD,
            [],
            {"container.engine"},
            refused="without an engine",
            spec=lambda s: s.update(
                engine="none", containers={"train": {"image": "x@sha256:" + "a" * 64}}
            ),
        ),
    }


LABELS = list(rows("image", "tag", "url", "0" * 40, "1" * 40, "http://apt"))


def test_every_change_id_has_a_row_or_a_reason():
    covered = set().union(
        *(r.ids for r in rows("image", "tag", "url", "0" * 40, "1" * 40, "http://apt").values()),
        *(r.ids for r in USER_ROWS.values()),  # scope: user, as alice (test_user_scope.py)
    )
    assert set(CHANGE_IDS) - covered == set(UNIT_ONLY), set(CHANGE_IDS) - covered - set(UNIT_ONLY)
    assert covered - set(CHANGE_IDS) <= set(CHECK_IDS)  # a refusal may come with a check


def test_not_drift_stays_quiet(sandbox: Sandbox, inventory: Path):
    """An unmanaged container, a file named like a core, a foreign daemon.json key and the
    user's untracked files outside declared paths are no drift, and the converge keeps them."""
    image = sandbox.state.images["train"]
    sh(sandbox, DOCKER, [
        f"docker run -d --name mine {image} sleep infinity >/dev/null", NAMED_LIKE_A_CORE,
        "mkdir -p /srv/notes && echo mine > /srv/notes/todo.txt",
        "python3 -c \"import json; p='/etc/docker/daemon.json'; d=json.load(open(p)); "
        "d['log-opts']={'max-size': '10m'}; json.dump(d, open(p, 'w'))\"",
    ])  # fmt: skip
    try:
        assert clean(inventory, DOCKER) == (0, set())
        again = converge([inventory], limit=[DOCKER])
        assert again.returncode == 0 and again.change_count == 0, again.changed
        sh(sandbox, DOCKER, ["docker inspect mine >/dev/null", "test -f /tmp/core.7",
                             "grep -q max-size /etc/docker/daemon.json"])  # fmt: skip
    finally:
        sh(sandbox, DOCKER, ["docker rm -f mine >/dev/null", "rm -rf /srv/notes /tmp/core.7"])


@pytest.mark.parametrize("label", LABELS)
def test_change(
    label: str, sandbox: Sandbox, inventory: Path, specs: dict, upstream: tuple, tmp_path: Path
):
    repo, first, pin = upstream
    row = rows(sandbox.state.images["train"], sandbox.train_image_tag, repo.url, first, pin,
               sandbox.apt_url)[label]  # fmt: skip
    path = inventory
    if row.spec:
        spec = copy.deepcopy(specs.get(row.host, {}))
        row.spec(spec)
        path = write_inventory(sandbox, tmp_path / "inv.yaml", {**specs, row.host: spec})
    sh(sandbox, row.host, row.change)
    rc, ids = drift(path, row.host)
    assert rc == 1 and row.ids <= ids, f"missing {row.ids - ids}; found {ids}"
    assert ids - row.ids <= ALSO, f"unexpected {ids - row.ids}"
    result = converge([path], limit=[row.host])
    if row.refused:
        assert result.returncode != 0, result.changed
        assert row.refused in result.stderr, result.stderr[-2000:]
        # Every error drift then reports that the converge cannot fix, the converge said.
        assert unsaid(path, row.host, result) == [], result.stderr[-2000:]
        sh(sandbox, row.host, row.kept)
        if row.opt_in:
            result = converge([path], limit=[row.host], data=row.opt_in)
            assert result.returncode == 0, result.stderr[-2000:]
            assert unsaid(path, row.host, result) == []
        sh(sandbox, row.host, row.restore)
    else:
        assert result.returncode == 0, result.stderr[-2000:]  # and drift clean, below
    sh(sandbox, row.host, row.check)
    assert clean(inventory, row.host) == (0, set())
