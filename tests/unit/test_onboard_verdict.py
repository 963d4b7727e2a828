"""Onboarding as a guide: the converge summarised from pyinfra's real log, the one verdict line
each ending gets, the command line to run again, and the sources check's wording."""

from __future__ import annotations

import shlex
from pathlib import Path

from gpurig.facts.gpurig_container import CpuQuota
from gpurig.facts.gpurig_node import CgroupMemory
from gpurig.onboard.onboard import (
    Check,
    OnboardError,
    Request,
    _cgroup,
    failed_operation,
    failure_verdict,
    preflight_refused,
    sources_check,
    summarise,
)
from gpurig.read.sources import Endpoint, Source
from gpurig.remote.converge import ConvergeResult
from tests.unit.fact_values import reader

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "onboard"
LOG = "".join(
    line
    for line in (FIXTURES / "pyinfra_converge_apt_unable-to-locate.log").open(encoding="utf-8")
    if not line.startswith("# ")
)
REQUEST = Request("root@203.0.113.7", "a100-3", Path("fleet dir/fleet.yaml"), groups=("skyrl",))


def test_the_failed_operation_and_apts_words_come_from_the_log() -> None:
    operation, lines = failed_operation(LOG, "full-4")
    assert operation == "Packages | Install gpurig-no-such-package"
    assert lines[-1] == "Error: executed 0 commands"
    assert failed_operation(LOG, "full-1") == (None, [])


def test_summary_names_the_concern_and_why_and_where_the_log_is() -> None:
    result = ConvergeResult(1, stderr=LOG)  # no JSON: pyinfra prints none once all hosts fail
    lines, failure = summarise(result, "full-4", Path("/logs/x.log"))
    assert failure == ("Packages", "E: Unable to locate package gpurig-no-such-package")
    assert lines == [
        "  Packages: FAILED Install gpurig-no-such-package: "
        "E: Unable to locate package gpurig-no-such-package",
        "  full log: /logs/x.log",
    ]


def test_summary_of_a_success_lists_changes_per_concern() -> None:
    changed = {"Packages | Install tmux": ["full-4"], "Secrets | Secret /root/.netrc": ["other"]}
    lines, failure = summarise(ConvergeResult(0, changed=changed), "full-4", Path("/l"))
    assert failure is None
    assert lines == ["  Packages: changed Install tmux", "  full log: /l"]


def test_a_failure_outside_any_operation_quotes_pyinfra() -> None:
    stderr = "--> Connecting to hosts...\n--> pyinfra error: No hosts remaining!\n"
    _, failure = summarise(ConvergeResult(1, stderr=stderr), "full-4", Path("/l"))
    assert failure == (None, "pyinfra error: No hosts remaining!")


def test_request_command_is_what_the_user_typed_quoted() -> None:
    argv = shlex.split(REQUEST.command())
    assert argv == ["gpurig", "onboard", "root@203.0.113.7", "--name", "a100-3",
                    "--inventory", "fleet dir/fleet.yaml", "--group", "skyrl"]  # fmt: skip


def test_verdicts_name_the_step_why_and_next_command() -> None:
    refused = OnboardError("preflight", "sources: cannot reach http://x/ (apt)", "sources", "fix")
    assert failure_verdict(refused, REQUEST) == (
        "onboard failed at preflight (sources): cannot reach http://x/ (apt); fix, "
        f"then: {REQUEST.command()}"
    )
    converge = OnboardError("converge", "E: Unable to locate package x", "Packages")
    assert failure_verdict(converge, REQUEST).endswith(
        "(a100-3 is recorded in fleet dir/fleet.yaml), then: " + REQUEST.command()
    )
    verify = OnboardError("verify", "drift is not clean:\n| table |")
    assert failure_verdict(verify, REQUEST) == (
        "onboard failed at verify: drift is not clean; fix that (a100-3 is recorded in "
        "fleet dir/fleet.yaml), then: gpurig drift 'fleet dir/fleet.yaml' --limit a100-3"
    )
    accept = OnboardError("accept", "fail: bf16 400 TFLOPS", "gpu")
    assert failure_verdict(accept, REQUEST).endswith(
        "then: gpurig accept a100-3 --inventory 'fleet dir/fleet.yaml'"
    )


def test_a_verdict_is_one_line_whatever_the_host_printed() -> None:
    odd = OnboardError("converge", "E: \x1b[2Jgone\rforged", "Packages")
    verdict = failure_verdict(odd, REQUEST)
    assert "\n" not in verdict and "\r" not in verdict and "\x1b" not in verdict


def test_sources_check_names_each_unreachable_source() -> None:
    apt = Source(
        "apt source for packages", "http://deb.debian.org/debian", Endpoint("deb.debian.org", 80)
    )
    reg = Source("container train", "reg:5000/t@sha256:" + "a" * 64, Endpoint("reg", 5000))
    results = {"deb.debian.org:80": "no answer within 5 s", "reg:5000": None}
    state = {"sources": {"needed": [apt, reg], "skipped": [], "results": results}}
    check = sources_check(state, 5)
    assert check.status == "FAIL"
    assert check.detail == (
        "cannot reach http://deb.debian.org/debian (apt source for packages) at "
        "deb.debian.org:80: no answer within 5 s"
    )
    state["sources"]["results"]["deb.debian.org:80"] = None
    assert sources_check(state, 5).detail == "reached within 5 s: deb.debian.org:80, reg:5000"


def test_cgroup_v1_no_limit_is_shown_as_none() -> None:
    # What a cgroup v1 sandbox host printed: memory.limit_in_bytes's "unlimited", quota -1.
    unlimited = {
        CgroupMemory: CgroupMemory.parse({"limit": "9223372036854771712"}),
        CpuQuota: CpuQuota.parse({"nproc": "8", "quota": "-1 100000"}),
    }
    check = _cgroup({"engine": "docker"}, reader(unlimited))
    assert check == Check("cgroup", "ok", "no memory or CPU limit on this login's cgroup")
    limited = {
        CgroupMemory: CgroupMemory.parse({"limit": str(8 * 1024**3)}),
        CpuQuota: CpuQuota.parse({"nproc": "8", "quota": "200000 100000"}),
    }
    detail = _cgroup({"engine": "none"}, reader(limited)).detail
    assert detail == "limited to memory 8 GiB, 2 CPUs"
    one = {**limited, CpuQuota: CpuQuota.parse({"nproc": "8", "quota": "100000 100000"})}
    assert _cgroup({"engine": "none"}, reader(one)).detail == "limited to memory 8 GiB, 1 CPU"


def test_every_failed_preflight_check_is_in_the_verdict_with_its_fix() -> None:
    """Not the first one and `...`: a user fixes all of them before running onboard again."""
    long = "cannot reach " + "; ".join(f"http://mirror-{i}.example/debian (apt)" for i in range(8))
    failed = [Check("disk", "FAIL", "/: 3.1 GiB free, below 50g"), Check("sources", "FAIL", long),
              Check("root", "FAIL", "sudo asks for a password")]  # fmt: skip
    verdict = failure_verdict(preflight_refused(failed), REQUEST)
    assert "..." not in verdict
    assert verdict.startswith(
        "onboard failed at preflight: disk: /: 3.1 GiB free, below 50g (fix: free space on the "
        "host or lower `checks` in the spec); sources: cannot reach http://mirror-0.example"
    )
    assert "http://mirror-7.example/debian (apt) (fix: fix the host's network or its sources" in (
        verdict
    )
    assert verdict.endswith(
        "root: sudo asks for a password (fix: log in as root or give the login passwordless "
        f"sudo); fix each as said, then: {REQUEST.command()}"
    )
    one = failure_verdict(preflight_refused(failed[:1]), REQUEST)
    assert one.startswith("onboard failed at preflight (disk): /: 3.1 GiB free, below 50g; free")
