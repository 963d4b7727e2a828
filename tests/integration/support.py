"""Helpers for the integration tests: a real sandbox (root, namespaces, Podman)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import testinfra
import yaml

from gpurig.sandbox import aptrepo, manager, registry
from gpurig.sandbox.services import url
from gpurig.sandbox.state import State, load

REPO_ROOT = Path(__file__).resolve().parents[2]
FLEET, FULL = 3, 4  # full-4: test_onboarding.py onboards it as a fresh rental


def gpurig(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed `gpurig` CLI as a user would. With GPURIG_RECORD_STATES set, drift
    over SSH runs through tests/drift_recorder.py, which records each host's state there (the
    findings catalogue's examples: tests/finding_examples.py)."""
    recording = os.environ.get("GPURIG_RECORD_STATES") and args[:1] == ("drift",)
    module = "tests.drift_recorder" if recording and "--local" not in args else "gpurig"
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
    )


class Sandbox:
    """A running sandbox: its name, directory, records, access files and service addresses
    (each sandbox has its own: read them here, never as constants)."""

    def __init__(self, name: str, top: Path, env: dict[str, str] | None = None) -> None:
        self.name, self.top, self.env = name, top, env
        self.paths = manager.Paths(top)

    def cli(self, command: str, *args: str) -> subprocess.CompletedProcess[str]:
        """`gpurig sandbox COMMAND` for this sandbox (with `env`: e.g. a private index)."""
        argv = ["sandbox", command, "--name", self.name, "--dir", str(self.top), *args]
        return gpurig(*argv, env=self.env)

    def up(self, fleet: int = FLEET, full: int = FULL) -> subprocess.CompletedProcess[str]:
        return self.cli("up", "--fleet", str(fleet), "--full", str(full))

    def down(self) -> subprocess.CompletedProcess[str]:
        return self.cli("down")

    @property
    def state(self) -> State:
        return load(self.paths.state)

    @property
    def registry(self) -> str:
        """host:port, as image references and insecure_registries name it."""
        return url(self.state, "registry")

    @property
    def apt_url(self) -> str:
        return url(self.state, "aptrepo")

    def toolkit(self, version: str) -> dict[str, str]:
        """`nvidia_toolkit` from the sandbox's apt repository, its key pinned (plain HTTP)."""
        return aptrepo.toolkit_spec(self.top, self.apt_url, version)

    @property
    def git_url(self) -> str:
        return url(self.state, "git")

    @property
    def train_image_tag(self) -> str:
        """The train image by tag (the digest form is state.images["train"])."""
        return f"{self.registry}/{registry.TRAIN_REPOSITORY}:1"


def run_verify(
    box: Sandbox, names: list[str], inventory: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The user-facing testinfra suite (tests/verify) against sandbox hosts, over real SSH."""
    hosts = ",".join(f"ssh://{name}" for name in names)
    env = {**os.environ, "GPURIG_INVENTORY": str(inventory or "")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/verify",
         f"--hosts={hosts}", f"--ssh-config={box.paths.ssh_config}"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip


def write_inventory(box: Sandbox, path: Path, specs: dict[str, dict]) -> Path:
    """A copy of the sandbox inventory with per-host specs added."""
    inventory = yaml.safe_load(box.paths.inventory.read_text())
    for name, spec in specs.items():
        inventory["hosts"][name]["spec"] = spec
    path.write_text(yaml.safe_dump(inventory))
    return path


def finding_ids(findings: list[dict]) -> set[str]:
    """Every id drift's JSON findings stand for: a finding that groups a subject's changes (a
    recreated container) carries the converge's own ids on its differences."""
    return {d["id"] or f["id"] for f in findings for d in f["differences"] or [f]}


def train_spec(image: str) -> dict:
    return {
        "image": image,
        # Below the sandbox machine's memory: a larger one is shm.size (a tmpfs that can fill
        # the host's memory), which no sandbox host should report.
        "shm_size": "8g",
        "user": "root",
        "network": "host",
        "mounts": ["/srv/data:/workspace/data", "/etc/hostname:/workspace/hostname:ro"],
        "command": ["sleep", "infinity"],
        # The sandbox's hosts inherit this machine's hard limits (nofile 20000 here); Podman
        # and Docker defaults exceed them, so the spec declares what the hosts can grant.
        "ulimits": {"nofile": "1024:20000", "nproc": "4096:4096"},
        "omp_num_threads": "auto",
    }


def host_spec(engine: str, image: str) -> dict:
    """A host running `image` (from a sandbox registry, which the host must trust)."""
    spec = {
        "engine": engine,
        "insecure_registries": [image.split("/", 1)[0]],
        "containers": {"train": train_spec(image)},
        "packages": ["curl"],
    }
    if engine == "podman":
        spec["podman_socket"] = True
    return spec


def remote(sandbox: Sandbox, name: str) -> testinfra.host.Host:
    return testinfra.get_host(f"ssh://{name}", ssh_config=str(sandbox.paths.ssh_config))


GIT_ID = ["-c", "user.name=t", "-c", "user.email=t@t"]


def git(work: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(work), *GIT_ID, *args], check=True, capture_output=True, text=True
    ).stdout.strip()


class Upstream:
    """A repository served by the sandbox's git daemon, and a local clone that commits to it."""

    def __init__(self, sandbox: Sandbox, work: Path, name: str) -> None:
        bare = sandbox.top / "git" / "repos" / f"{name}.git"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
        subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
        git(work, "config", "core.autocrlf", "false")
        git(work, "remote", "add", "origin", str(bare))
        self.work, self.url = work, f"{sandbox.git_url}/{name}.git"

    def commit(self, message: str) -> str:
        git(self.work, "add", "-A")
        git(self.work, "commit", "-qm", message)
        git(self.work, "push", "-q", "origin", "HEAD:main")
        return git(self.work, "rev-parse", "HEAD")


# What `sandbox up --release` starts: full-1 and full-2 for the release matrix (Podman and
# Docker), full-3 for the node agent on a host nothing converged.
RELEASE_FULL = 3


@dataclass
class ReleaseHosts:
    """Each release's hosts, started once for every module that needs them and removed once the
    last of those modules is done with them (the modules' tests run next to each other)."""

    box: Sandbox
    users: dict[str, set[str]]  # suite: the modules still to use its hosts
    started: set[str] = field(default_factory=set)

    def hold(self, suite: str) -> None:
        if suite not in self.started:
            up = self.box.cli("up", "--release", suite, "--fleet", "0", "--full", str(RELEASE_FULL))
            assert up.returncode == 0, up.stdout + up.stderr
            self.started.add(suite)

    def done(self, suite: str, module: str) -> None:
        left = self.users.setdefault(suite, set())
        left.discard(module)
        if not left and suite in self.started:
            self.started.discard(suite)
            down = self.box.cli("down", "--release", suite)
            assert down.returncode == 0, down.stderr

    def close(self) -> None:
        """Every release still up removed (a run cut short: -x, a failed setup)."""
        for suite in sorted(self.started):
            self.users[suite] = set()
            self.done(suite, "")
