"""One host's refusal fails that host's run alone: the refusal (an OperationError raised while
pyinfra prepares the operations) is recorded for it, and the other hosts are converged."""

from __future__ import annotations

from pathlib import Path

from support import Sandbox, remote, write_inventory

from gpurig.remote.converge import converge

REFUSED, CONVERGED = "fleet-001", "fleet-003"
DEST = "/root/gpurig-refusal-test"


def test_a_refused_host_fails_alone_and_the_others_converge(sandbox: Sandbox, tmp_path: Path):
    src = tmp_path / "token"
    src.write_text("a token\n")
    missing = tmp_path / "no-such-token"

    def spec(source: Path) -> dict:
        return {"engine": "none", "secrets": [{"src": str(source), "dest": DEST}]}

    inventory = write_inventory(
        sandbox, tmp_path / "inv.yaml", {REFUSED: spec(missing), CONVERGED: spec(src)}
    )
    for name in (REFUSED, CONVERGED):
        remote(sandbox, name).check_output(f"rm -f {DEST}")
    done = converge([inventory], limit=[REFUSED, CONVERGED])
    assert done.returncode != 0
    assert done.failed_hosts == [REFUSED], done.stderr[-3000:]
    assert f"{missing}: expected a readable file on this machine" in done.stderr + done.stdout
    assert remote(sandbox, CONVERGED).file(DEST).content_string == "a token\n"
    assert not remote(sandbox, REFUSED).file(DEST).exists
