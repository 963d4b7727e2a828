"""The all-reduce across a group's hosts (`gpurig accept --group`): the mpirun command line
built and checked by a pure function, the refusals (from the specs before any host is touched,
from the GPUs the hosts list), the GroupAllReduce fact's own shell on outputs recorded on real
multi-node runs (tests/fixtures/gpu, each naming its source), the verdict and the record, and
the CLI's refusals through click's runner. No GPU here: nothing fakes a run."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_nccl_tests import recorded

from gpurig.cli.main import main
from gpurig.facts.gpurig_acceptance import GroupAllReduce, UserGroupAllReduce
from gpurig.onboard import accept_group
from gpurig.read import nccl_tests
from gpurig.read.nccl_group import (
    IMAGE_KEY,
    Member,
    Refused,
    check_listed,
    check_specs,
    judge_group,
    launch,
    mpirun_argv,
    place,
)
from gpurig.read.nccl_tests import all_reduce_verdict, message_bytes, parse_all_reduce
from gpurig.spec.inventory import load_inventory_text
from gpurig.spec.model import normalise
from tests.unit.gpu_fixtures import run_with_stand_in

OKE_A100 = "nccl-tests_all_reduce_perf_a100x16_2-node_oke.txt"
H100_WARN = "nccl-tests_all_reduce_perf_h100x16_2-node_nccl-warn_PARTIAL.txt"
H100_HPCX = "nccl-tests_all_reduce_perf_h100x16_2-node_hpcx_PARTIAL.txt"
GH200_BUSY = "nccl-tests_all_reduce_perf_gh200x8_2-node_cuda-busy.txt"
GH200_WRONG = "nccl-tests_all_reduce_perf_gh200x2_2-node_wrong-out-of-bounds.txt"
A3MEGA = "nccl-tests_all_reduce_perf_h100x16_2-node_a3mega.txt"
EACH_ALONE = "nccl-tests_all_reduce_perf_a100x4_2-node_no-mpi-each-alone_DERIVED.txt"
A100 = "NVIDIA A100-SXM4-40GB"
H100 = "NVIDIA H100 80GB HBM3"
GH200 = "NVIDIA GH200 120GB"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB6w8YgX1fT9tJmA1q0N3s0p2Yk6mVn2r8xqB5b3QdJc"
DIGEST = "registry.example/nccl-tests@sha256:" + "0" * 64


def members(model: str, gpus: int, hosts: int = 2) -> list[Member]:
    return [Member(f"gpu-{i}", f"10.0.0.{i}", (model,) * gpus) for i in range(1, hosts + 1)]


# The command line


def test_mpirun_names_each_host_with_its_gpus_as_slots() -> None:
    argv = mpirun_argv([("10.0.0.1", 8), ("node-2.cluster", 4)], 1 << 30)
    assert argv == [
        "mpirun", "--allow-run-as-root", "--bind-to", "none",
        "-H", "10.0.0.1:8,node-2.cluster:4", "-np", "12", "-x", "NCCL_DEBUG=WARN",
        "all_reduce_perf", "-b", "1073741824", "-e", "1073741824", "-f", "2", "-g", "1", "-c", "1",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "address",
    [
        "-oProxyCommand=touch /tmp/x",  # an option, to mpirun or to the ssh it starts
        "a;reboot", "a b", "$(reboot)", "`id`", "a:8", "fe80::1", "[::1]", "a..b", "a.", ".a",
        "-a", "a-", "", "ä.example", "a\nb", "a" * 64, ".".join(["a" * 63] * 5),
    ],
)  # fmt: skip
def test_an_address_mpirun_cannot_take_is_refused(address: str) -> None:
    with pytest.raises(ValueError, match="host name or IPv4 address"):
        mpirun_argv([(address, 8), ("10.0.0.2", 8)], 1024)


@pytest.mark.parametrize("gpus", [0, -1, 65, True, "8", 8.0, None])
def test_a_gpu_count_out_of_bounds_is_refused(gpus: Any) -> None:
    with pytest.raises(ValueError, match="GPUs is not a count"):
        mpirun_argv([("10.0.0.1", gpus), ("10.0.0.2", 8)], 1024)


def test_one_host_a_host_twice_or_an_odd_size_is_refused() -> None:
    with pytest.raises(ValueError, match="two hosts or more"):
        mpirun_argv([("10.0.0.1", 8)], 1024)
    with pytest.raises(ValueError, match="named twice"):
        mpirun_argv([("node-1", 8), ("NODE-1", 8)], 1024)
    for size in (0, 1 << 41, "1G", 1.5):
        with pytest.raises(ValueError, match="message size"):
            mpirun_argv([("node-1", 8), ("node-2", 8)], size)  # type: ignore[arg-type]


def test_the_launch_quotes_every_word() -> None:
    argv = mpirun_argv([("10.0.0.1", 8), ("10.0.0.2", 8)], 1024)
    inside = launch(argv, "docker", "train; reboot", None)
    assert shlex.split(inside) == ["docker", "exec", "train; reboot", *argv]
    image = launch(argv, "podman", None, DIGEST)
    assert shlex.split(image) == [
        "podman", "run", "--rm", "--network", "host", "--ipc", "host",
        "--device", "nvidia.com/gpu=all", DIGEST, *argv,
    ]  # fmt: skip
    assert shlex.split(launch(argv, "docker", None, DIGEST))[7:9] == ["--gpus", "all"]


# Where it runs, and the refusals


def spec(**declared: Any) -> dict[str, Any]:
    return normalise(declared)


def test_it_runs_in_the_first_gpu_container_else_the_pinned_image() -> None:
    train = {"image": DIGEST, "gpus": "all"}
    both = spec(engine="docker", containers={"train": train}, acceptance={"nccl_image": DIGEST})
    assert place(both) == ("docker", "train", None)
    assert place(spec(engine="podman", acceptance={"nccl_image": DIGEST})) == (
        "podman", None, DIGEST
    )  # fmt: skip


def test_no_container_and_no_pinned_image_is_refused_naming_the_key() -> None:
    for declared in (spec(engine="docker"), spec(acceptance={"nccl_image": DIGEST})):
        with pytest.raises(Refused, match=rf"spec\.{IMAGE_KEY}.*pinned by digest"):
            place(declared)


def test_specs_that_rule_it_out_are_refused() -> None:
    ok = spec(engine="docker", acceptance={"nccl_image": DIGEST})
    check_specs("g", [("a", ok), ("b", ok)])
    with pytest.raises(Refused, match="group g has 1 host: "):
        check_specs("g", [("a", ok)])
    with pytest.raises(
        Refused, match=r"b declares gpu: absent; .* every host of the group has GPUs"
    ):
        check_specs("g", [("a", ok), ("b", {**ok, "gpu": "absent"})])


def test_a_host_listing_no_gpu_is_refused() -> None:
    group = [*members(H100, 8, 1), Member("cpu-1", "10.0.0.9", ())]
    with pytest.raises(Refused, match="cpu-1 lists no GPU"):
        check_listed("g", group)
    check_listed("g", members(H100, 8))


# Recorded multi-node outputs, parsed


def test_a_healthy_two_node_a100_run_is_read_whole() -> None:
    run = parse_all_reduce(recorded(OKE_A100))  # mpirun's ssh warnings come first
    assert len(run.ranks) == 16 and {r.name for r in run.ranks} == {A100}
    assert {r.host for r in run.ranks} == {"nccl-test-a100-worker-0", "nccl-test-a100-worker-1"}
    assert [row.size for row in run.rows] == [1073741824, 10737418240]
    assert (run.rows[-1].in_place.busbw, run.out_of_bounds, run.avg_busbw) == (180.08, 0, 175.531)
    assert run.failures == [] and run.warnings == []


def test_a_run_whose_ranks_fail_before_the_table_is_refused_as_a_table() -> None:
    with pytest.raises(ValueError, match="no all_reduce_perf table row"):
        parse_all_reduce(recorded(GH200_BUSY))
    with pytest.raises(ValueError, match="no all_reduce_perf table row"):
        parse_all_reduce(recorded(H100_WARN))


def test_wrong_values_out_of_bounds_and_failures_across_two_nodes_are_read() -> None:
    run = parse_all_reduce(recorded(GH200_WRONG))
    assert len(run.rows) == 25 and {r.host for r in run.ranks} == {"gpu-1-1", "gpu-1-7"}
    bad = next(row for row in run.rows if row.size == 1048576)
    assert (bad.out_of_place.wrong, bad.in_place.wrong) == (96, 32)  # a '#wrong' header
    assert run.out_of_bounds == 4 and run.avg_busbw == 4.79995
    assert run.failures == [
        ".. gpu-1-1 pid 662195: Test failure common.cu:1189",
        ".. gpu-1-7 pid 2448661: Test failure common.cu:1189",
    ]


# The verdict


def test_a_healthy_multi_node_run_is_recorded_not_judged_on_bandwidth() -> None:
    """No baseline is sourced across hosts: correctness passes, the bandwidth is recorded."""
    verdict = judge_group({"exit": 0, "output": recorded(OKE_A100)}, members(A100, 8))
    assert verdict.status == "unjudged"
    assert verdict.reasons == [
        "no sourced all-reduce baseline across 2 hosts: bus bandwidth recorded, not judged"
    ]
    assert (verdict.figures["busbw_gbps"], verdict.figures["bytes"]) == (180.08, 10737418240)
    assert "baseline" not in verdict.figures


def test_sixteen_h100_on_two_hosts_do_not_take_the_one_host_baseline() -> None:
    """8x H100 has a one-host baseline (460 GB/s); 2 hosts x 8 is not judged by it, nor would
    2 hosts x 4 be by the 8-GPU row."""
    output = {"exit": 0, "output": recorded(H100_HPCX)}
    verdict = all_reduce_verdict(output, H100, 16, hosts=2)
    assert verdict.status == "unjudged" and verdict.figures["busbw_gbps"] == 444.25
    assert all_reduce_verdict(output, H100, 8, hosts=2).status == "unjudged"
    assert all_reduce_verdict(output, H100, 8, hosts=1).figures["baseline"]["busbw_gbps"] == 460.0
    assert message_bytes(H100, 16, 2) == 1 << 30  # the table's default size across hosts


def test_the_partial_recording_without_rank_lines_is_judged_without_coverage() -> None:
    verdict = judge_group({"exit": 0, "output": recorded(H100_HPCX)}, members(H100, 8))
    assert verdict.status == "unjudged" and verdict.figures["ranks"] == 0


@pytest.mark.parametrize(
    ("fixture", "model", "gpus", "cause"),
    [
        (H100_WARN, H100, 8, "h100-4: Test NCCL failure common.cu:1057 'internal error / '"),
        (GH200_BUSY, GH200, 4,
         "gpu-1-1: Test CUDA failure common.cu:1304 'CUDA-capable device(s) is/are busy or "
         "unavailable'"),
    ],
)  # fmt: skip
def test_a_run_that_fails_before_its_table_fails_the_group_with_its_cause(
    fixture: str, model: str, gpus: int, cause: str
) -> None:
    """The recordings do not say mpirun's own exit status; 1 is what a failed rank makes it."""
    verdict = judge_group({"exit": 1, "output": recorded(fixture)}, members(model, gpus))
    assert verdict.status == "fail"
    assert verdict.reasons == [f"all_reduce_perf failed (exit 1): {cause}"]


def test_nccl_s_warning_is_the_cause_where_no_rank_reported_a_failure() -> None:
    head = recorded(H100_WARN).split("h100-4: Test NCCL failure")[0]  # a hung run: cut there
    verdict = judge_group({"exit": 124, "output": head}, members(H100, 8))
    assert verdict.reasons == [
        "all_reduce_perf failed (timed out): h100-4:739790:739878 [4] misc/socket.cc:397 NCCL "
        "WARN Net : connecting to address  with family 33621 is neither AF_INET(2) nor AF_INET6(10)"
    ]


def test_wrong_values_fail_the_group_whatever_the_bandwidth() -> None:
    verdict = judge_group({"exit": 0, "output": recorded(GH200_WRONG)}, members(GH200, 1))
    assert verdict.status == "fail"
    assert verdict.reasons[:3] == [
        "all_reduce_perf found 128 wrong values (#wrong)",
        "all_reduce_perf found 4 out-of-bounds values",
        "2 ranks' lines report a failure: .. gpu-1-1 pid 662195: Test failure common.cu:1189",
    ]
    one = recorded(GH200_WRONG).replace(".. gpu-1-7 pid 2448661: Test failure", "")
    verdict = judge_group({"exit": 0, "output": one}, members(GH200, 1))
    assert verdict.reasons[2] == (
        "1 rank's line reports a failure: .. gpu-1-1 pid 662195: Test failure common.cu:1189"
    )


def test_a_run_that_left_out_a_host_s_gpus_fails() -> None:
    """The recorded run had 16 ranks on 2 hosts; a group of 3 hosts x 8 expected 24."""
    verdict = judge_group({"exit": 0, "output": recorded(OKE_A100)}, members(A100, 8, hosts=3))
    assert verdict.status == "fail"
    assert (
        verdict.reasons[-1] == "the run had 16 ranks on 2 hosts; the group has 24 GPUs on 3 hosts"
    )


NOT_REDUCED = "the all-reduce did not reduce across the group: "
CAUSE = "(nccl-tests built without MPI, or mpirun did not start one job)"


def test_processes_that_each_ran_alone_fail_the_group_naming_the_cause() -> None:
    """Four rank-0 runs of one rank (busbw 0.00) cover 4 GPUs on 2 hosts by count alone."""
    verdict = judge_group({"exit": 0, "output": recorded(EACH_ALONE)}, members(A100, 2))
    assert verdict.status == "fail"
    assert verdict.reasons[0] == (
        f"{NOT_REDUCED}4 processes each printed a header of their own listing one rank; "
        f"4 processes each printed rank 0; bus bandwidth 0 on every row {CAUSE}"
    )
    assert (verdict.figures["ranks"], verdict.figures["busbw_gbps"]) == (4, 0.0)
    # NCCL's INFO lines say it too where the rank lines were cut.
    info = "".join(
        f"h{i}:1:1 [0] NCCL INFO comm 0x55f6848de3b0 rank 0 nranks 1 cudaDev 0 busId f000 - "
        "Init COMPLETE\n"
        for i in range(2)
    )
    table = recorded(EACH_ALONE).split("# Using devices")[-1].split("NCCL version", 1)[1]
    cut = judge_group({"exit": 0, "output": info + table}, members(A100, 1))
    assert cut.status == "fail" and cut.reasons[0].startswith(NOT_REDUCED)
    assert "2 communicators of one rank (NCCL INFO)" in cut.reasons[0]
    # One job of several ranks prints one rank 0, and NCCL's INFO a communicator of them all.
    assert judge_group({"exit": 0, "output": recorded(OKE_A100)}, members(A100, 8)).status == (
        "unjudged"
    )


def each_alone(recording: str) -> list[str]:
    """What each process of a multi-node run prints when it runs as a job of its own, built
    from a recording of that run as one job: per rank, the recording's header, its rank line
    renumbered 0 (the one rank of its own run) and its table with every busbw 0.00 (a run of
    one rank moves nothing between GPUs: busbw = algbw x 2(n-1)/n, nccl-tests'
    src/all_reduce.cu, with n = 1) and 'Avg bus bandwidth : 0', as nccl-tests prints them."""
    lines = recorded(recording).splitlines()
    header = next(line for line in lines if line.startswith("# nThread"))
    ranks = [line for line in lines if re.match(r"#\s+Rank\s+\d+ ", line)]
    start = next(i for i, line in enumerate(lines) if "out-of-place" in line) - 1
    end = next(i for i, line in enumerate(lines) if "Avg bus bandwidth" in line)
    table = [_busbw_zero(line) for line in lines[start:end]]
    return [
        "\n".join([header, "#", "# Using devices", re.sub(r"Rank\s+\d+", "Rank  0", rank),
                   *table, "# Avg bus bandwidth    : 0 ", "#", ""])
        for rank in ranks
    ]  # fmt: skip


def _busbw_zero(line: str) -> str:
    """A table row with both busbw cells 0.00 in their own columns; other lines unchanged."""
    cells = list(re.finditer(r"\S+", line))
    if line.startswith("#") or len(cells) != 13:
        return line
    for cell in (cells[11], cells[7]):  # size count type redop root, then two halves of four
        line = line[: cell.start()] + "0.00".rjust(cell.end() - cell.start()) + line[cell.end() :]
    return line


def test_two_8_gpu_hosts_each_process_alone_fail_the_group() -> None:
    """The field's case: two 8-GPU hosts, nccl-tests without MPI under mpirun: 16 processes,
    each its own header listing rank 0 alone, every busbw 0.00 (built from the A3 Mega
    recording, tests/fixtures/gpu, whose source it names)."""
    output = "".join(each_alone(A3MEGA))
    run = parse_all_reduce(output)
    assert run.headers == 16 and len(run.ranks) == 16 and run.avg_busbw == 0
    assert all(h.busbw == 0 for row in run.rows for h in (row.out_of_place, row.in_place))
    verdict = judge_group({"exit": 0, "output": output}, members(H100, 8))
    assert verdict.status == "fail"
    assert verdict.reasons == [
        f"{NOT_REDUCED}16 processes each printed a header of their own listing one rank; "
        f"16 processes each printed rank 0; bus bandwidth 0 on every row {CAUSE}"
    ]


def test_a_trimmed_output_whose_busbw_is_0_on_every_row_fails_the_group() -> None:
    """The output's start cut (a tail kept): no header, no rank line, no NCCL INFO line, only
    the last process's table, every busbw 0.00 and 'Avg bus bandwidth : 0'."""
    last = each_alone(A3MEGA)[-1]
    table = last[last.index("#  Rank") :].split("\n", 1)[1]
    verdict = judge_group({"exit": 0, "output": table}, members(H100, 8))
    assert verdict.status == "fail"
    assert verdict.reasons == [f"{NOT_REDUCED}bus bandwidth 0 on every row {CAUSE}"]
    assert verdict.figures["ranks"] == 0 and verdict.figures["avg_busbw_gbps"] == 0


def test_one_process_s_header_listing_one_rank_fails_the_group() -> None:
    """The tail kept the last process whole: one header, listing one rank, of a group of 16."""
    verdict = judge_group({"exit": 0, "output": each_alone(A3MEGA)[-1]}, members(H100, 8))
    assert verdict.status == "fail"
    assert verdict.reasons[0] == (
        f"{NOT_REDUCED}its one header lists one rank of the group's 16 GPUs; bus bandwidth 0 "
        f"on every row {CAUSE}"
    )
    assert verdict.reasons[1] == "the run had 1 rank on 1 host; the group has 16 GPUs on 2 hosts"


def test_it_fails_whatever_the_baseline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A baseline across hosts that 0 GB/s would meet does not make a run that did not reduce
    pass; the healthy recording still passes it."""
    row = {"match": "H100", "gpus": 16, "hosts": 2, "bytes": "8G", "busbw_gbps": 0.0}
    monkeypatch.setattr(nccl_tests, "baseline_for", lambda *_: row)
    verdict = judge_group({"exit": 0, "output": "".join(each_alone(A3MEGA))}, members(H100, 8))
    assert verdict.status == "fail" and verdict.reasons[0].startswith(NOT_REDUCED)
    healthy = judge_group({"exit": 0, "output": recorded(A3MEGA)}, members(H100, 8))
    assert healthy.status == "pass"


def test_small_sizes_at_0_00_do_not_fail_a_healthy_run() -> None:
    """The A3 Mega run prints busbw 0.00 up to 256 bytes, then more: it reduced."""
    verdict = judge_group({"exit": 0, "output": recorded(A3MEGA)}, members(H100, 8))
    assert verdict.status == "unjudged" and verdict.figures["busbw_gbps"] == 338.82


def test_no_mpirun_in_the_image_is_unmeasured_and_no_status_fails() -> None:
    missing = {"exit": 127, "output": "sh: 1: mpirun: not found"}
    assert judge_group(missing, members(H100, 8)).status == "unmeasured"
    assert judge_group(None, members(H100, 8)).status == "fail"


# The fact's own shell, with a stand-in engine printing a recorded output


def test_the_fact_launches_mpirun_in_the_container_and_reads_the_run(tmp_path: Path) -> None:
    fact = GroupAllReduce()
    command = fact.command(
        hosts=[("10.0.0.1", 8), ("10.0.0.2", 8)], nccl_bytes=1 << 30, container="train"
    )
    found = fact.process(run_with_stand_in(tmp_path, "docker", recorded(OKE_A100), command))
    assert (tmp_path / "args").read_text().split() == [
        "exec", "train", *mpirun_argv([("10.0.0.1", 8), ("10.0.0.2", 8)], 1 << 30)
    ]  # fmt: skip
    assert found == {"exit": 0, "output": recorded(OKE_A100).rstrip("\n")}
    assert judge_group(found, members(A100, 8)).figures["ranks"] == 16


def test_the_fact_refuses_an_unchecked_host_before_printing_a_command() -> None:
    with pytest.raises(ValueError, match="host name or IPv4"):
        GroupAllReduce().command(hosts=[("$(reboot)", 8), ("b", 8)], nccl_bytes=1024)


def test_the_user_scope_fact_goes_through_the_user_s_socket() -> None:
    command = UserGroupAllReduce().command(
        hosts=[("a", 1), ("b", 1)], nccl_bytes=1024, engine="podman", image=DIGEST
    )
    assert command.startswith("export CONTAINER_HOST=") and "podman run --rm" in command


# The record, and the CLI's refusals (no host is touched)


def inventory(tmp_path: Path, spec_a: str, spec_b: str, group: str = "train") -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(f"""\
version: 1
groups:
  {group}: {{}}
hosts:
  gpu-a:
    address: 192.0.2.10
    ssh: {{user: root, host_key: "{KEY}"}}
    groups: [{group}]
    spec: {spec_a}
  gpu-b:
    address: 192.0.2.11
    ssh: {{user: root, host_key: "{KEY}"}}
    groups: [{group}]
    spec: {spec_b}
""")
    return path


def test_the_record_and_its_reports(tmp_path: Path) -> None:
    path = inventory(tmp_path, f'{{engine: docker, acceptance: {{nccl_image: "{DIGEST}"}}}}', "{}")
    first = load_inventory_text(path.read_text(), str(path)).hosts[0]
    group = members(A100, 8)
    verdict = judge_group({"exit": 0, "output": recorded(OKE_A100)}, group)
    accepted = accept_group.GroupAccepted("train", accept_group.ran_in(first), group, verdict)
    saved = accept_group.save(first, accepted, tmp_path / "state")
    assert saved.parent.name == "groups" and saved.name == "train.json"
    record = json.loads(saved.read_text())
    assert record["ran_in"] == f"image {DIGEST} on gpu-a"
    assert record["hosts"][0] == {
        "name": "gpu-1",
        "address": "10.0.0.1",
        "gpus": 8,
        "models": [A100],
    }
    assert record["figures"]["nccl"]["busbw_gbps"] == 180.08 and record["status"] == "unjudged"
    assert json.loads(accept_group.render(first, accepted, "json")) == record
    lines = accept_group.render(first, accepted, "table").splitlines()
    table = {k.strip(): v.strip() for k, v in (line.split("  ", 1) for line in lines)}
    assert table["nccl all-reduce"] == "unjudged: busbw 180.08 GB/s at 10737418240 bytes"
    assert table["hosts"] == f"gpu-1 (8x {A100}), gpu-2 (8x {A100})"
    assert not accepted.failed


@pytest.mark.parametrize(
    ("spec_a", "spec_b", "message"),
    [
        ("{gpu: absent}", "{gpu: absent}",
         "gpu-a, gpu-b declare gpu: absent; the all-reduce across hosts runs only where every "
         "host of the group has GPUs"),
        ("{engine: docker}", "{}", f"spec.{IMAGE_KEY}"),
    ],
)  # fmt: skip
def test_accept_group_refuses_before_touching_a_host(
    tmp_path: Path, spec_a: str, spec_b: str, message: str
) -> None:
    path = inventory(tmp_path, spec_a, spec_b)
    result = CliRunner().invoke(main, ["accept", "--group", "train", "--inventory", str(path)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("accept --group refused: ") and message in result.stderr


def test_accept_group_refuses_a_group_of_one_and_an_unknown_group(tmp_path: Path) -> None:
    path = tmp_path / "one.yaml"
    path.write_text(
        f"version: 1\ngroups: {{solo: {{}}}}\nhosts:\n  gpu-a:\n    address: 192.0.2.10\n"
        f'    ssh: {{user: root, host_key: "{KEY}"}}\n    groups: [solo]\n'
    )
    runner = CliRunner()
    one = runner.invoke(main, ["accept", "--group", "solo", "--inventory", str(path)])
    assert one.exit_code == 2 and "group solo has 1 host: " in one.stderr
    unknown = runner.invoke(main, ["accept", "--group", "nope", "--inventory", str(path)])
    assert unknown.exit_code == 2
    assert "no host is in a group named nope; groups with hosts: solo" in unknown.stderr
    both = runner.invoke(main, ["accept", "gpu-a", "--group", "solo", "--inventory", str(path)])
    assert both.exit_code == 2 and "name one HOST, or a group with --group" in both.stderr
