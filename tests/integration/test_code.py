"""What runs inside the box: checkouts from the sandbox's git daemon at pinned commits with LF
scripts, refusals that leave the user's work alone, locked Python environments (uv on a fleet
host, pip with hashes on a full host), a secret that never shows, pre-launch cleanup, and
`gpurig pin` against the sandbox registry.

Hosts: fleet-001 (repos, uv, secret, cleanup: needs only git, python3 and sshd, no network
beyond the bridge: the wheels travel inside the repository); full-1 (pip: python3-venv comes
from Debian's mirror through the machine's NAT). No test here uses full-2/full-3 (engines).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import testinfra
import yaml
from support import (
    REPO_ROOT,
    Sandbox,
    Upstream,
    finding_ids,
    git,
    gpurig,
    remote,
    write_inventory,
)

from gpurig.remote.converge import converge
from tests.lockproject import make_project, make_wheel

FLEET_HOST, FULL_HOST = "fleet-001", "full-1"
CODE, PROJ, PIPPROJ = "/srv/code", "/srv/proj", "/srv/pipproj"
CODE_OP, ENV_OP = f"Repositories | Checkout {CODE}", f"Repositories | Python environment for {PROJ}"
FINDER = REPO_ROOT / "tests" / "fixtures" / "code" / "editable_finder_setuptools-84.2.1.txt"


@pytest.fixture(scope="module")
def code(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Upstream:
    """A repository whose first commit carries a CRLF shell script (written on Windows)."""
    upstream = Upstream(sandbox, tmp_path_factory.mktemp("code"), "code")
    (upstream.work / "run.sh").write_bytes(b"#!/bin/sh\r\necho ok\r\n")
    (upstream.work / "train.py").write_text("print('train')\n")
    upstream.commit("first")
    return upstream


@pytest.fixture(scope="module")
def proj(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Upstream:
    """A uv project with its wheels in the repository (fleet hosts reach no index)."""
    upstream = Upstream(sandbox, tmp_path_factory.mktemp("proj"), "proj")
    make_project(upstream.work, {"alpha": "1.0", "keepme": "2.0"}, WHEELS, f"{PROJ}/wheels")
    upstream.commit("locked")
    return upstream


WHEELS = {"alpha": ["1.0", "1.1"], "keepme": ["1.0", "2.0"]}


def spec_for(code: Upstream, code_ref: str, proj: Upstream, proj_ref: str, **extra: object):
    return {
        "repos": {
            CODE: {"url": code.url, "ref": code_ref, "line_endings": "lf"},
            PROJ: {
                "url": proj.url,
                "ref": proj_ref,
                "python": {"manager": "uv", "lockfile": "uv.lock", "keep": ["keepme"]},
            },
        },
        **extra,
    }


def uv_binary() -> Path:
    """The uv of this environment (a locked dev dependency), to stand in for an image's uv."""
    path = Path(sys.executable).parent / "uv"
    if not path.exists() or path.read_bytes()[:4] != b"\x7fELF":
        pytest.fail(f"{path} is not the uv binary: run `uv sync --frozen` (dev group)")
    return path


@pytest.fixture(scope="module")
def fleet_host(sandbox: Sandbox) -> testinfra.host.Host:
    """fleet-001 as an ML image ships it: uv on PATH, keepme 1.0 in the system's Python."""
    config = str(sandbox.paths.ssh_config)
    subprocess.run(
        ["scp", "-q", "-F", config, str(uv_binary()), f"{FLEET_HOST}:/usr/local/bin/uv"], check=True
    )
    wheel = make_wheel(sandbox.top, "keepme", "1.0")
    subprocess.run(["scp", "-q", "-F", config, str(wheel), f"{FLEET_HOST}:/tmp/"], check=True)
    shell = remote(sandbox, FLEET_HOST)
    dist = "/usr/lib/python3/dist-packages"
    shell.check_output(f"python3 -m zipfile -e /tmp/{wheel.name} {dist} && rm /tmp/{wheel.name}")
    return shell


@pytest.fixture(scope="module")
def converged(
    sandbox: Sandbox, fleet_host, code: Upstream, proj: Upstream, tmp_path_factory
) -> Path:
    inventory = tmp_path_factory.mktemp("inv") / "inventory.yaml"
    spec = spec_for(
        code, git(code.work, "rev-parse", "HEAD"), proj, git(proj.work, "rev-parse", "HEAD")
    )
    write_inventory(sandbox, inventory, {FLEET_HOST: spec})
    result = converge([inventory], limit=[FLEET_HOST])
    assert result.returncode == 0, result.stderr
    assert result.changed[CODE_OP] == [FLEET_HOST]
    return inventory


def test_checkout_is_at_the_pin_with_lf_scripts(sandbox: Sandbox, converged: Path, code):
    shell = remote(sandbox, FLEET_HOST)
    assert shell.check_output(f"git -C {CODE} rev-parse HEAD") == git(
        code.work, "rev-parse", "HEAD"
    )
    assert "\\r" not in shell.check_output(f"od -c {CODE}/run.sh")
    assert shell.check_output(f"sh {CODE}/run.sh") == "ok"
    again = converge([converged], limit=[FLEET_HOST])
    assert again.returncode == 0 and again.change_count == 0, again.changed


def test_drift_is_clean_for_code_after_converge(converged: Path):
    report = drift_findings(converged)
    assert not [f for f in report if f["id"].startswith(("repo.", "cleanup."))], report


def drift_findings(inventory: Path) -> list[dict]:
    proc = gpurig("drift", str(inventory), "--limit", FLEET_HOST, "--format", "json")
    return json.loads(proc.stdout)["hosts"][0]["findings"]


def test_dirty_checkout_is_refused_and_the_edit_survives(sandbox: Sandbox, converged: Path):
    shell = remote(sandbox, FLEET_HOST)
    shell.check_output(f"echo '# my hotfix' >> {CODE}/train.py")
    try:
        result = converge([converged], limit=[FLEET_HOST])
        assert result.returncode != 0
        assert "no uncommitted changes, found M train.py" in result.stderr
        assert shell.check_output(f"tail -n 1 {CODE}/train.py") == "# my hotfix"
    finally:
        shell.check_output(f"git -C {CODE} checkout -- train.py")


def test_local_commit_with_a_crlf_script_is_drift_and_refused(sandbox: Sandbox, converged: Path):
    shell = remote(sandbox, FLEET_HOST)
    pin = shell.check_output(f"git -C {CODE} rev-parse HEAD")
    shell.check_output(
        f"printf '#!/bin/sh\\r\\necho hotfix\\r\\n' > {CODE}/hotfix.sh && git -C {CODE} add "
        f"hotfix.sh && git -C {CODE} -c user.name=u -c user.email=u@u commit -qm hotfix"
    )
    try:
        ids = finding_ids(drift_findings(converged))
        # The converge leaves a local commit alone, so that refusal is the drift reported.
        assert "repo.local_commits" in ids, ids
        result = converge([converged], limit=[FLEET_HOST])
        assert result.returncode != 0  # a local commit is the user's work: reported, kept
        assert shell.file(f"{CODE}/hotfix.sh").exists
    finally:
        shell.check_output(f"git -C {CODE} reset -q --hard {pin}")
    # The reset rewrote run.sh as committed (CRLF): drift again, until a converge fixes it.
    assert "repo.crlf" in finding_ids(drift_findings(converged))
    result = converge([converged], limit=[FLEET_HOST])
    assert result.returncode == 0, result.stderr
    assert not [f for f in drift_findings(converged) if f["id"].startswith("repo.")]


def test_moving_the_pin_moves_the_checkout(
    sandbox: Sandbox, converged: Path, code: Upstream, proj: Upstream, tmp_path: Path
):
    (code.work / "run.sh").write_bytes(b"#!/bin/sh\r\necho moved\r\n")
    moved = code.commit("second")
    spec = spec_for(code, moved, proj, git(proj.work, "rev-parse", "HEAD"))
    inventory = write_inventory(sandbox, tmp_path / "inventory.yaml", {FLEET_HOST: spec})
    result = converge([inventory], limit=[FLEET_HOST])
    assert result.returncode == 0, result.stderr
    shell = remote(sandbox, FLEET_HOST)
    assert shell.check_output(f"git -C {CODE} rev-parse HEAD") == moved
    assert shell.check_output(f"sh {CODE}/run.sh") == "moved"


def test_uv_environment_keeps_the_system_package(sandbox: Sandbox, converged: Path):
    python = f"{PROJ}/.venv/bin/python"
    shell = remote(sandbox, FLEET_HOST)
    assert shell.check_output(f"{python} -c 'import alpha; print(alpha.__version__)'") == "1.0"
    # The lockfile says keepme 2.0; the image's 1.0 stays what the environment imports.
    assert shell.check_output(
        f"{python} -c 'import keepme; print(keepme.__file__, keepme.__version__)'"
    ) == ("/usr/lib/python3/dist-packages/keepme/__init__.py 1.0")


def _with_imports(converged: Path, path: Path, imports: list[str]) -> Path:
    inventory = yaml.safe_load(converged.read_text())
    inventory["hosts"][FLEET_HOST]["spec"]["repos"][PROJ]["python"]["imports"] = imports
    path.write_text(yaml.safe_dump(inventory))
    return path


def test_declared_imports_shadowed_by_the_checkout_are_found(
    sandbox: Sandbox, converged: Path, tmp_path: Path
):
    """The field notes' `docker/` case on a real environment: the environment's own python,
    started in the checkout inside the drift's one round trip, says where each module comes
    from. Untracked directories are not dirt, so only `env.imports` speaks."""
    shell = remote(sandbox, FLEET_HOST)
    shell.check_output(
        f"mkdir {PROJ}/keepme {PROJ}/docker {PROJ}/alpha && touch {PROJ}/keepme/__init__.py"
    )
    names = ["alpha", "keepme", "docker", "json", "no_such_module"]
    try:
        findings = drift_findings(_with_imports(converged, tmp_path / "shadowed.yaml", names))
    finally:
        shell.check_output(f"rm -r {PROJ}/keepme {PROJ}/docker {PROJ}/alpha")
    found = [f for f in findings if f["id"] == "env.imports"]
    assert len(found) == 1, [(f["id"], f["actual"]) for f in findings]
    [imports] = found
    assert imports["severity"] == "error" and imports["remediation"] == "reconverge"
    assert imports["actual"] == (
        f"keepme: from {PROJ}/keepme; docker: a directory without __init__.py: {PROJ}/docker; "
        "no_such_module: not found"
    )
    # About this checkout (an earlier test may have moved the other one on purpose).
    dirt = [f for f in findings if f["id"].startswith("repo.") and PROJ in f["message"]]
    assert not dirt, findings
    # Without the directories: alpha from the environment, keepme from the system's
    # dist-packages (kept), json from the standard library.
    kept = _with_imports(converged, tmp_path / "clean.yaml", ["alpha", "keepme", "json"])
    clean = drift_findings(kept)
    assert "env.imports" not in {f["id"] for f in clean}, clean


def test_changed_lockfile_is_drift_then_converged(
    sandbox: Sandbox, converged: Path, code: Upstream, proj: Upstream, tmp_path: Path
):
    make_project(proj.work, {"alpha": "1.1", "keepme": "2.0"}, WHEELS, f"{PROJ}/wheels")
    bumped = proj.commit("bump alpha")
    spec = spec_for(code, git(code.work, "rev-parse", "HEAD"), proj, bumped)
    inventory = write_inventory(sandbox, tmp_path / "inventory.yaml", {FLEET_HOST: spec})
    shell = remote(sandbox, FLEET_HOST)
    shell.check_output(
        f"git -C {PROJ} fetch -q origin && git -C {PROJ} checkout -q --detach {bumped}"
    )
    assert "repo.env" in finding_ids(drift_findings(inventory))
    result = converge([inventory], limit=[FLEET_HOST])
    assert result.returncode == 0, result.stderr
    assert result.changed[ENV_OP] == [FLEET_HOST]
    python = f"{PROJ}/.venv/bin/python"
    assert shell.check_output(f"{python} -c 'import alpha; print(alpha.__version__)'") == "1.1"
    assert "repo.env" not in finding_ids(drift_findings(inventory))


def test_pip_with_hashes_on_a_full_host(sandbox: Sandbox, tmp_path: Path):
    upstream = Upstream(sandbox, tmp_path / "pipproj", "pipproj")
    make_project(upstream.work, {"alpha": "1.0", "keepme": "2.0"}, WHEELS, f"{PIPPROJ}/wheels")
    ref = upstream.commit("locked")
    python = {"manager": "pip", "lockfile": "requirements.txt", "keep": ["keepme"]}
    spec = {
        "packages": ["python3-venv"],
        "repos": {PIPPROJ: {"url": upstream.url, "ref": ref, "python": python}},
    }
    inventory = write_inventory(sandbox, tmp_path / "inventory.yaml", {FULL_HOST: spec})
    result = converge([inventory], limit=[FULL_HOST])
    assert result.returncode == 0, result.stderr
    shell = remote(sandbox, FULL_HOST)
    venv_python = f"{PIPPROJ}/.venv/bin/python"
    assert shell.check_output(f"{venv_python} -c 'import alpha; print(alpha.__version__)'") == "1.0"
    assert not shell.run(
        f"{venv_python} -c 'import keepme'"
    ).succeeded  # filtered out, not installed
    # A requirements file whose hash does not match fails with pip's own words.
    requirements = upstream.work / "requirements.txt"
    wrong = re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, requirements.read_text())
    requirements.write_text(wrong)
    bad = upstream.commit("bad hash")
    spec["repos"][PIPPROJ]["ref"] = bad
    write_inventory(sandbox, inventory, {FULL_HOST: spec})
    failed = converge([inventory], limit=[FULL_HOST])
    assert failed.returncode != 0 and "HASH" in failed.stderr.upper()


def test_secret_never_shows_in_output_or_process_list(
    sandbox: Sandbox, converged: Path, tmp_path: Path
):
    token = secrets.token_hex(24)
    source = tmp_path / "token"
    source.write_text(token + "\n")
    inventory = yaml.safe_load(converged.read_text())
    inventory["hosts"][FLEET_HOST]["spec"]["secrets"] = [
        {"src": str(source), "dest": "/root/.config/app/token", "mode": "0600"}
    ]
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(inventory))
    seen: list[str] = []
    sampler = subprocess.Popen(
        ["ssh", "-F", str(sandbox.paths.ssh_config), FLEET_HOST,
         "while :; do ps -eo args; sleep 0.05; done"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    reader = threading.Thread(target=lambda: seen.extend(sampler.stdout), daemon=True)
    reader.start()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pyinfra", "-y", "-vvv", "--limit", FLEET_HOST,
             "inventory.py", "deploys/gpu_host.py"],
            cwd=REPO_ROOT, env={**os.environ, "GPURIG_INVENTORY": str(path)},
            capture_output=True, text=True,
        )  # fmt: skip
    finally:
        sampler.kill()
        reader.join(timeout=5)
    assert proc.returncode == 0, proc.stderr
    assert len(seen) > 20, "the process sampler saw nothing"
    assert token not in proc.stdout + proc.stderr
    assert not [line for line in seen if token in line]
    shell = remote(sandbox, FLEET_HOST)
    file = shell.file("/root/.config/app/token")
    assert file.mode == 0o600 and file.content_string == token + "\n"
    report = gpurig("drift", str(path), "--limit", FLEET_HOST, "--format", "json")
    assert token not in report.stdout + report.stderr


def test_missing_secret_source_changes_nothing(sandbox: Sandbox, converged: Path, tmp_path: Path):
    inventory = yaml.safe_load(converged.read_text())
    inventory["hosts"][FLEET_HOST]["spec"]["secrets"] = [
        {"src": str(tmp_path / "nope"), "dest": "/root/nope"}
    ]
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(inventory))
    result = converge([path], limit=[FLEET_HOST])
    assert result.returncode != 0 and str(tmp_path / "nope") in result.stderr
    assert not remote(sandbox, FLEET_HOST).file("/root/nope").exists


def test_cleanup_removes_only_stale_leftovers(sandbox: Sandbox, converged: Path, tmp_path: Path):
    shell = remote(sandbox, FLEET_HOST)
    site = shell.check_output(f"ls -d {PROJ}/.venv/lib/python3*/site-packages")
    finder = FINDER.read_text()
    shell.check_output(
        "mkdir -p /tmp/ray/session_old1 /tmp/ray/session_old2 /tmp/ray/session_live && "
        "ln -sfn /tmp/ray/session_live /tmp/ray/session_latest && "
        f"cd {CODE} && (ulimit -c unlimited; sh -c 'kill -SEGV $$') ; "
        f"echo 'not a core' > {CODE}/core.999"
    )
    for name, target in (("gone_0", "/srv/gone"), ("live_0", CODE)):
        text = finder.replace("@TARGET@", target).replace("proj_0", name)
        shell.check_output(f"cat > {site}/__editable___{name}_finder.py <<'EOF'\n{text}EOF")
    has_core = shell.file(f"{CODE}/core").exists
    inventory = yaml.safe_load(converged.read_text())
    inventory["hosts"][FLEET_HOST]["spec"]["cleanup"] = {
        "ray_sessions": True, "core_files": True, "editable_finders": True,
    }  # fmt: skip
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(inventory))

    shell.check_output("nohup bash -c 'exec -a raylet sleep 600' >/dev/null 2>&1 &")
    try:
        live = converge([path], limit=[FLEET_HOST])
        assert live.returncode == 0, live.stderr
        assert shell.file("/tmp/ray/session_old1").exists  # Ray runs: nothing under /tmp/ray goes
    finally:
        shell.run("pkill -f '^raylet'")
    result = converge([path], limit=[FLEET_HOST])
    assert result.returncode == 0, result.stderr
    assert not shell.file("/tmp/ray/session_old1").exists
    assert not shell.file("/tmp/ray/session_old2").exists
    assert shell.file("/tmp/ray/session_live").exists
    assert shell.file(f"{CODE}/core.999").exists  # named like a core, not one
    if has_core:
        assert not shell.file(f"{CODE}/core").exists
    assert not shell.file(f"{site}/__editable___gone_0_finder.py").exists
    assert shell.file(f"{site}/__editable___live_0_finder.py").exists
    again = converge([path], limit=[FLEET_HOST])
    assert again.returncode == 0 and again.change_count == 0, again.changed


def test_pin_resolves_the_sandbox_registry_tag(sandbox: Sandbox, tmp_path: Path):
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "# pinned by gpurig pin\n"
        "version: 1\n"
        "defaults:\n"
        f"  spec:\n    insecure_registries: ['{sandbox.registry}']  # sandbox registry\n"
        "hosts:\n"
        "  a:\n"
        "    address: 203.0.113.1\n"
        "    spec:\n"
        "      containers:\n"
        "        train:\n"
        f"          image: '{sandbox.train_image_tag}' # weekly build\n"
    )
    check = gpurig("pin", "--check", str(path))
    assert check.returncode == 1 and f"{sandbox.train_image_tag}" in check.stdout
    pinned = gpurig("pin", str(path))
    assert pinned.returncode == 0, pinned.stderr
    text = path.read_text()
    assert f"image: '{sandbox.state.images['train']}'" in text
    assert "# weekly build" in text and "# sandbox registry" in text and text.startswith("# pinned")
    assert gpurig("pin", "--check", str(path)).returncode == 0
    assert gpurig("validate", str(path)).returncode == 0
