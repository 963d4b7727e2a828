"""The rental guide run as written: its marked blocks (`<!-- guide-test: STEP -->`, see
docs/hooks.py) taken from docs/guides/rental.md and docs/guides/ci.md at test time, in the
page's order, against a fresh sandbox full host treated as a rental. The test hands over only
what a provider does (address, port, user root, a key saved where the guide says) and answers
the host key question as a user who checked the fingerprint; everything else is the guide's
commands in a HOME and a checkout of their own, then CI's in another HOME and checkout.

What the test itself supplies, and why:
- the `given` block's variables (ADDRESS, PORT, PROFILE): the rental's address and port, and
  `docker-cpu` (a sandbox host has no GPU);
- in the `declare` block, the sandbox registry's image for the guide's `registry.example`
  tag, and that registry in `insecure_registries` (it serves plain HTTP; a real one TLS);
- `ID` in the `explain` block: each id drift printed;
- two mistakes made by hand on the host, then fixed as drift's own fix lines say;
- CI's `uv` (the checkout's locked environment stands for `uv sync --frozen`) and its secret.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest
import yaml
from ruamel.yaml import YAML
from support import FULL, REPO_ROOT, Sandbox, remote

from docs.hooks import GUIDE_TEST

pytestmark = pytest.mark.late  # a host of its own, kept by later ups
HOST = f"full-{FULL + 2}"  # fresh: no other test touches it
NAME = "a100-3"  # the guide's name for the rental
RENTAL, CI = REPO_ROOT / "docs/guides/rental.md", REPO_ROOT / "docs/guides/ci.md"
WORKFLOW = "examples/github-actions-drift.yml"
STEPS = ["given", "onboard", "declare", "pin", "converge", "verify", "drift", "explain"]
GUIDE_IMAGE = "registry.example/team/train:1"
VENV_BIN = Path(sys.executable).parent  # gpurig, pyinfra and pytest, as `. .venv/bin/activate`
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def marked(page: Path) -> list[tuple[str, str, str]]:
    """(step, language, body) of each marked block, in the page's order."""
    text = page.read_text(encoding="utf-8")
    return [(m["step"], m["lang"], m["body"]) for m in GUIDE_TEST.finditer(text)]


def commands(body: str) -> list[str]:
    """A shell block's commands, one per line (continued lines joined), comments left to sh."""
    lines = body.replace("\\\n", " ").splitlines()
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def checkout(dest: Path) -> Path:
    """A checkout of this repository as its tracked (and not ignored) files make it."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT, check=True, capture_output=True, text=True,
    ).stdout.split("\0")  # fmt: skip
    for name in filter(None, files):
        if (REPO_ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, dest / name)
    return dest


class Shell:
    """A user's shell: its own HOME, the checkout as working directory, the venv on PATH."""

    def __init__(self, home: Path, work: Path, env: dict[str, str]) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.work = work
        path = f"{VENV_BIN}:{os.environ['PATH']}"
        self.env = {"HOME": str(home), "PATH": path, "LANG": "C.UTF-8", **env}
        self.said: list[str] = []

    def run(self, command: str, answer: str = "") -> subprocess.CompletedProcess[str]:
        """`command` as sh runs it; `answer` typed at its prompts (Enter for pyinfra's)."""
        done = subprocess.run(
            ["sh", "-c", command], cwd=self.work, env=self.env, input=answer,
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        self.said.append(f"$ {command}\n[{done.returncode}]\n{done.stdout}{done.stderr}")
        return done

    def ok(self, command: str, answer: str = "") -> str:
        done = self.run(command, answer)
        assert done.returncode == 0, self.said[-1][-4000:]
        return ANSI.sub("", done.stdout + done.stderr)


def changes(said: str) -> int:
    """Operations changed, from pyinfra's results table (its `Grand total` row)."""
    [total] = re.findall(r"^\s*Grand total\s+(.+)$", said, re.M)
    changed = total.split()[1]
    return 0 if changed == "-" else int(changed)


def findings(table: str) -> list[tuple[str, str]]:
    """(id, fix) of each finding in drift's table."""
    ids = re.findall(r"^\S+\s+(?:error|warn)\s+.*\(([\w.]+)\)$", table, re.M)
    fixes = re.findall(r"^\s+fix: (.*)$", table, re.M)
    assert len(ids) == len(fixes), table
    return list(zip(ids, fixes, strict=True))


def declare(inventory: Path, block: str, sandbox: Sandbox) -> None:
    """The `declare` block merged into the host's entry, as a user edits the file (comments
    kept), with the sandbox's registry for the guide's placeholder."""
    assert GUIDE_IMAGE in block
    wanted = yaml.safe_load(block.replace(GUIDE_IMAGE, sandbox.train_image_tag))
    rt = YAML()
    doc = rt.load(inventory.read_text())
    for name, entry in wanted["hosts"].items():
        spec = {**entry["spec"], "insecure_registries": [sandbox.registry]}
        doc["hosts"][name]["spec"] = spec
    with inventory.open("w") as out:
        rt.dump(doc, out)


def fingerprint(host_key: str) -> str:
    return subprocess.run(
        ["ssh-keygen", "-lf", "-"], input=host_key, capture_output=True, text=True, check=True
    ).stdout.split()[1]


def test_the_rental_guide_as_written(sandbox: Sandbox, tmp_path: Path):
    start = time.monotonic()
    assert sandbox.up(full=FULL + 2).returncode == 0
    rec = sandbox.state.hosts[HOST]
    blocks = marked(RENTAL)
    assert [step for step, _, _ in blocks] == STEPS, "the guide's walkthrough changed: follow it"
    block = {step: body for step, _, body in blocks}

    given = {"ADDRESS": rec.address, "PORT": "22", "PROFILE": "docker-cpu"}
    assert sorted(re.findall(r"\b([A-Z]+)=", block["given"])) == sorted(given)
    work = checkout(tmp_path / "fleet")
    user = Shell(tmp_path / "home", work, given)
    key = tmp_path / "home" / ".ssh" / "rental_ed25519"
    key.parent.mkdir(mode=0o700, parents=True)
    shutil.copyfile(sandbox.paths.client_key, key)
    key.chmod(0o600)
    inventory = work / "inventories" / "fleet.yaml"
    try:
        # Onboard: the host key's fingerprint checked (as with the provider), then trusted.
        *first, onboard = commands(block["onboard"])
        for command in first:
            user.ok(command)
        said = user.ok(onboard, answer="y\n")
        assert f"key fingerprint is {fingerprint(rec.host_key)}" in said
        assert said.strip().splitlines()[-1].startswith(f"onboard ok: {NAME} converged")
        entry = yaml.safe_load(inventory.read_text())["hosts"][NAME]
        assert entry["ssh"]["key"] == "~/.ssh/rental_ed25519"
        assert entry["ssh"]["host_key"] == rec.host_key

        # Declare the container by tag, pin it, validate.
        declare(inventory, block["declare"], sandbox)
        for command in commands(block["pin"]):
            user.ok(command)
        image = yaml.safe_load(inventory.read_text())["hosts"][NAME]["spec"]["containers"]
        assert image["train"]["image"].split("@")[1] == sandbox.state.images["train"].split("@")[1]

        def converge() -> list[int]:
            return [changes(user.ok(c, answer="\n")) for c in commands(block["converge"])]

        counts = converge()
        assert counts[0] > 0 and counts[1:] == [0, 0], counts  # again: no changes
        said = user.ok(" && ".join(commands(block["verify"])))
        assert re.search(r"\d+ passed", said) and "no inventory" not in said, said

        def drift() -> list[subprocess.CompletedProcess[str]]:
            return [user.run(c) for c in commands(block["drift"])]

        assert [d.returncode for d in drift()] == [0, 0], user.said[-2:]
        assert (work / "drift.md").is_file()

        # Two mistakes by hand: the container recreated with the engine's defaults, and one
        # of gpurig's core-dump files removed.
        host = remote(sandbox, HOST)
        host.check_output(
            f"docker rm -f train >/dev/null && docker run -d --name train "
            f"--ulimit nofile=1024:20000 --ulimit nproc=4096:4096 "
            f"{shlex.quote(sandbox.state.images['train'])} >/dev/null && "
            "rm /etc/profile.d/gpurig-core.sh"
        )
        table, markdown = drift()
        assert (table.returncode, markdown.returncode) == (1, 1), user.said[-2:]
        found = findings(ANSI.sub("", table.stdout))
        assert {i for i, _ in found} == {"container.differs", "core_dumps.file"}, table.stdout
        assert "container.differs" in (work / "drift.md").read_text()
        [explain] = commands(block["explain"])
        assert " ID" in explain
        for finding_id, _ in found:
            assert finding_id in user.ok(explain.replace(" ID", f" {finding_id}", 1))
        # Fixed as the output says, in its order: the command a fix names, answered at the
        # prompt as a user at a terminal would; for [reconverge], the guide's converge, which
        # fixes what it may and fails the host on what is still refused, saying so.
        for n, (_, fix) in enumerate(found):
            named = re.findall(r"`(pyinfra [^`]+)`", fix)
            if named:
                user.ok(named[0], answer="\n")
                continue
            assert fix.startswith("[reconverge]"), fix
            pending = [i for i, _ in found[n + 1 :]]
            for command in commands(block["converge"]):
                done = user.run(command, answer="\n")
                refused = "gpurig: refused: container train" in done.stdout + done.stderr
                assert done.returncode == 0 or (refused and "container.differs" in pending)
        assert [d.returncode for d in drift()] == [0, 0], user.said[-2:]
        shm = host.check_output("docker inspect -f '{{.HostConfig.ShmSize}}' train")
        assert shm == str(8 * 1024**3)
        assert host.file("/etc/profile.d/gpurig-core.sh").exists

        ci_said = run_ci(tmp_path, work, key.read_text())
        assert "a100-3" in ci_said
    finally:
        duration = time.monotonic() - start
        print(f"rental guide: {duration:.0f} s")
        (tmp_path / "transcript.txt").write_text("\n".join(user.said))


def run_ci(tmp_path: Path, work: Path, key: str) -> str:
    """The CI guide: its workflow's steps (the file ci.md includes), then its JUnit block, each
    in a checkout of the committed files (the inventory now among them) and a fresh HOME."""
    ci_text = CI.read_text(encoding="utf-8")
    assert f"<!-- include FILE: {WORKFLOW} -->" in ci_text
    repo = checkout(tmp_path / "ci")
    shutil.copy2(work / "inventories" / "fleet.yaml", repo / "inventories" / "fleet.yaml")
    # The runner's uv: its locked environment is the checkout's .venv, already made.
    shim = tmp_path / "ci-bin"
    shim.mkdir()
    (shim / "uv").write_text('#!/bin/sh\ncase "$1" in sync) exit 0;; run) shift; exec "$@";; esac\n'
                             "exit 2\n")  # fmt: skip
    (shim / "uv").chmod(0o755)
    summary = tmp_path / "summary.md"
    runner = Shell(tmp_path / "ci-home", repo, {"GITHUB_STEP_SUMMARY": str(summary)})
    runner.env["PATH"] = f"{shim}:{runner.env['PATH']}"
    # The repository's secrets and variables, as GitHub puts them in a step's env.
    given = {"secrets": {"GPURIG_SSH_KEY": key},
             "vars": {"GPURIG_DOCS_URL": "https://docs.example/gpurig"}}  # fmt: skip
    failed = False
    for step in yaml.safe_load((repo / WORKFLOW).read_text())["jobs"]["drift"]["steps"]:
        if "run" not in step or (failed and step.get("if") != "always()"):
            continue
        env = {k: re.sub(r"\$\{\{ (secrets|vars)\.(\w+) \}\}", lambda m: given[m[1]][m[2]], v)
               for k, v in (step.get("env") or {}).items()}  # fmt: skip
        done = subprocess.run(
            ["bash", "-e", "-c", step["run"]], cwd=repo, env={**runner.env, **env},
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, (step["name"], done.stdout, done.stderr)
    assert not (tmp_path / "ci-home" / ".ssh" / "rental_ed25519").exists()
    published = summary.read_text()
    assert published == (repo / "drift.md").read_text() and NAME in published

    [(_, _, body)] = [b for b in marked(CI) if b[0] == "ci-junit"]
    other = Shell(tmp_path / "ci-home-2", repo, {"SSH_KEY": key})
    for command in commands(body):
        other.ok(command)
    report = ElementTree.parse(repo / "drift.xml").getroot()
    cases = report.findall(".//testcase")
    assert [c.get("name") for c in cases] == [NAME], ElementTree.tostring(report)
    assert not report.findall(".//failure") and not report.findall(".//error")
    return published
