"""README's "Installing gpurig on a node", run as written: its wheelhouse command in this
checkout, its node commands as root on full-1 (python3-venv from Debian's mirror through the
machine's NAT, as the README says), wheels only (`--no-index`); then a job's bare PATH finds
`gpurig` and it runs as a user that is not root. Removed afterwards: full-1 is the user-scope
tests' node, which installs gpurig its own way."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from support import REPO_ROOT, Sandbox, remote

HOST = "full-1"
WORK = "/root/gpurig-node-install"  # where the node's commands run, wheels/ copied in
NODE_STEP = "# on each node"
# A batch job's environment: no login files, the system's PATH.
JOB = "env -i HOME=/tmp PATH=/usr/local/bin:/usr/bin:/bin"


def readme_steps() -> tuple[str, str]:
    """The README's node install block: (what runs in the checkout, what runs on a node)."""
    text = (REPO_ROOT / "README.md").read_text()
    section = text.split("**Installing gpurig on a node.**", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    here, node = block.split(NODE_STEP, 1)
    return here, node.split("\n", 1)[1]


def test_the_readmes_node_install_runs_as_written(sandbox: Sandbox, tmp_path: Path) -> None:
    here, node = readme_steps()
    house = here.replace("wheels/", f"{tmp_path}/wheels/")
    built = subprocess.run(["sh", "-euc", house], cwd=REPO_ROOT, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    # gpurig's own wheel installs by its hash too: one requirements file, every line pinned
    lines = (tmp_path / "wheels" / "requirements.txt").read_text().splitlines()
    pinned = [line for line in lines if line and not line.startswith((" ", "#"))]
    assert any(line.startswith("gpurig==") for line in pinned)
    assert all("--hash=sha256:" in line or line.endswith("\\") for line in pinned)
    root = remote(sandbox, HOST)
    root.check_output(
        f"rm -rf /opt/gpurig /usr/local/bin/gpurig {WORK} && mkdir -p {WORK} && "
        "{ python3 -c 'import ensurepip' 2>/dev/null || { apt-get update -qq && "
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; }; }"
    )
    packed = subprocess.run(["tar", "-C", str(tmp_path), "-cf", "-", "wheels"],
                            capture_output=True, check=True).stdout  # fmt: skip
    ssh = ["ssh", "-F", str(sandbox.paths.ssh_config), HOST, f"tar -C {WORK} -xf -"]
    subprocess.run(ssh, input=packed, check=True, timeout=120)
    try:
        done = root.run(f"cd {WORK} && sh -euc {shlex.quote(node)}")
        assert done.rc == 0, done.stdout + done.stderr
        # Root's alone: nothing in the venv another account may change.
        shared = r"find /opt/gpurig ! -type l \( -perm /022 -o ! -user root \)"
        assert root.check_output(shared) == ""
        job = root.run(
            f"cd / && runuser -u nobody -- {JOB} sh -c "
            "'command -v gpurig && gpurig compat --driver 550.54.15 --cuda 12.4 --json'"
        )
        assert job.rc == 0, job.stdout + job.stderr
        found, verdict = job.stdout.split("\n", 1)
        assert found == "/usr/local/bin/gpurig"
        assert '"verdict": "ok"' in verdict
    finally:
        root.run(f"rm -rf /opt/gpurig /usr/local/bin/gpurig {WORK}; rmdir /etc/gpurig")
