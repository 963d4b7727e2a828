"""NCCL all-reduce acceptance: nccl-tests' `all_reduce_perf` output parsed (its ranks, its
table's out-of-place and in-place columns with #wrong, the out-of-bounds and "Avg bus
bandwidth" lines, the ranks' "Test ... failure" and NCCL's WARN lines) and judged against a
per-GPU-model baseline for one host (gpurig/data/nccl_baselines.yaml; none is sourced across
hosts). Pure functions over text, tested on outputs recorded on real machines, one host and
several (tests/fixtures/gpu).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gpurig.data.tables import table
from gpurig.read.acceptance import Verdict
from gpurig.spec.units import parse_size
from gpurig.spec.words import counted


@dataclass(frozen=True)
class Half:
    """One half of a table row (out-of-place or in-place): time in µs, algorithm and bus
    bandwidth in GB/s, and #wrong (None: 'N/A', or a build before 2.10 that printed its max
    error there instead of a count). nccl-tests prints the count with `%6g` of a double
    (src/common.cu: `PRINT("  %7s  %6s  %6s  %6g", ..., (double)wrongElts)`), so a count of a
    million or more reads as 1.04858e+06: under a `#wrong` header that is a count too."""

    time_us: float
    algbw: float
    busbw: float
    wrong: int | None


@dataclass(frozen=True)
class Row:
    """One message size of the table."""

    size: int
    count: int
    type: str
    redop: str
    out_of_place: Half
    in_place: Half


@dataclass(frozen=True)
class Rank:
    """One `# Rank N ... on HOST device D [BUS] NAME` line."""

    rank: int
    host: str
    device: int
    name: str


@dataclass(frozen=True)
class AllReduceRun:
    """What one all_reduce_perf run printed."""

    ranks: list[Rank] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    out_of_bounds: int | None = None  # values outside the expected range; None: line missing
    avg_busbw: float | None = None
    failures: list[str] = field(default_factory=list)  # "Test NCCL failure ..." and the like
    warnings: list[str] = field(default_factory=list)  # NCCL's "NCCL WARN ..." lines
    alone: int = 0  # NCCL INFO lines of a communicator of one rank ("rank 0 nranks 1")
    headers: int = 0  # "# nThread N nGpus M ..." lines: one per job, printed by its first rank


_RANK_RE = re.compile(
    r"Rank\s+(\d+)(?:\s+Group\s+\d+)?\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s+(.+?)\s*$"
)
# The banner a job prints once, from its first process (nccl-tests' PRINT: is_main_proc):
# processes that each ran as a job of their own each print it.
_HEADER_RE = re.compile(r"^\s*#\s*nThread\s+\d+\s+nGpus\s+\d+\b")
_OOB_RE = re.compile(r"Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")
_AVG_RE = re.compile(r"Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
# A rank's own report that it failed (nccl-tests' common.cu: "HOST: Test NCCL failure FILE:LINE
# 'why'", "Test CUDA failure", then " .. HOST pid N: Test failure FILE:LINE"), and NCCL's
# warnings (printed with NCCL_DEBUG=WARN or more: what failed inside NCCL, e.g. a socket).
_FAILURE_RE = re.compile(r"\bTest (?:NCCL |CUDA )?failure\b")
_WARN_RE = re.compile(r"\bNCCL WARN\b")
# NCCL's INFO line of a communicator that has formed ("comm 0x... rank 0 nranks 1 cudaDev 0
# ... - Init COMPLETE", with NCCL_DEBUG=INFO): one of a single rank ran alone.
_ALONE_RE = re.compile(r"\bNCCL INFO comm \S+ rank 0 nranks 1\b")
ALONE = "each process ran alone: nccl-tests without MPI support, or mpirun did not start one job"
NOT_REDUCED = "the all-reduce did not reduce across the group"
NOT_REDUCED_CAUSE = "nccl-tests built without MPI, or mpirun did not start one job"


def _half(cells: Sequence[str], counted: bool) -> Half:
    time_us, algbw, busbw, wrong = cells
    count = None
    if wrong != "N/A":
        value = float(wrong)  # a count, or an older build's max error: a number either way
        count = int(value) if counted or wrong.isdigit() else None
    return Half(float(time_us), float(algbw), float(busbw), count)


def _row(cells: list[str], counted: bool) -> Row | None:
    """A table row: size count type redop [root] then two halves of four; None otherwise.
    `counted`: the table's header names the column #wrong (a count, whatever its notation)."""
    if len(cells) == 13:  # nccl-tests 2.10+ print a root column (-1 for all-reduce)
        del cells[4]
    if len(cells) != 12 or not (cells[0].isdigit() and cells[1].isdigit()):
        return None
    try:
        halves = _half(cells[4:8], counted), _half(cells[8:], counted)
        return Row(int(cells[0]), int(cells[1]), cells[2], cells[3], *halves)
    except ValueError:
        return None


def parse_all_reduce(text: str) -> AllReduceRun:
    """all_reduce_perf's output, whatever else is interleaved with it (NCCL INFO lines, MPI
    warnings). Raises ValueError when it holds neither a table row nor an 'Avg bus bandwidth'
    line: the test did not run (not installed, CUDA or NCCL failed first)."""
    ranks, rows, failures, warnings = [], [], [], []
    out_of_bounds = avg = None
    alone = headers = 0
    counted = False
    for line in text.splitlines():
        comment = line.lstrip().startswith("#")
        if (rank := _RANK_RE.search(line)) and comment:
            ranks.append(Rank(int(rank[1]), rank[2], int(rank[3]), rank[4]))
        elif match := _OOB_RE.search(line):
            out_of_bounds = int(match[1])
        elif match := _AVG_RE.search(line):
            avg = float(match[1])
        elif _HEADER_RE.search(line):
            headers += 1
        elif comment:
            counted = counted or "#wrong" in line
        elif _FAILURE_RE.search(line):
            failures.append(line.strip()[:300])
        elif _WARN_RE.search(line):
            warnings.append(line.strip()[:300])
        elif _ALONE_RE.search(line):
            alone += 1
        elif row := _row(line.split(), counted):
            rows.append(row)
    if not rows and avg is None:
        raise ValueError("no all_reduce_perf table row or 'Avg bus bandwidth' line")
    return AllReduceRun(ranks, rows, out_of_bounds, avg, failures, warnings, alone, headers)


def baseline_for(gpu_name: str, gpus: int, hosts: int = 1) -> dict[str, Any] | None:
    """The baseline row for this many GPUs of this model on this many hosts (the longest
    matching `match`); every sourced row is of one host."""
    rows = [
        row
        for row in table("nccl_baselines.yaml")["models"]
        if row["match"].lower() in gpu_name.lower() and (row["gpus"], row["hosts"]) == (gpus, hosts)
    ]
    return max(rows, key=lambda row: len(row["match"]), default=None)


def message_bytes(gpu_name: str, gpus: int, hosts: int = 1) -> int:
    """The message size to run at: the baseline's, else the table's default."""
    row = baseline_for(gpu_name, gpus, hosts)
    return parse_size(str(row["bytes"] if row else table("nccl_baselines.yaml")["default_bytes"]))


Status = Literal["pass", "fail", "unjudged", "unmeasured"]


@dataclass(frozen=True)
class NcclVerdict:
    """The all-reduce step's conclusion and the figures behind it (recorded with the host)."""

    status: Status
    reasons: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


def judge_all_reduce(run: AllReduceRun, gpu_name: str, gpus: int, hosts: int = 1) -> NcclVerdict:
    """Wrong results fail whatever the speed (#wrong above 0 in either half, or out-of-bounds
    values), and so do a rank's own "Test ... failure" and processes that each ran as a job
    of their own (no all-reduce across them took place: across hosts, a run that did not
    reduce across the group, `not_reduced`, fails whatever the baseline); then the bus
    bandwidth at the largest size (the better of out-of-place and in-place) against the
    model's baseline for this many GPUs on this many hosts, where one exists."""
    reasons = []
    wrong = sum(half.wrong or 0 for row in run.rows for half in (row.out_of_place, row.in_place))
    if wrong:
        reasons.append(f"all_reduce_perf found {wrong} wrong values (#wrong)")
    if run.out_of_bounds:
        reasons.append(f"all_reduce_perf found {run.out_of_bounds} out-of-bounds values")
    if run.failures:
        lines = counted(len(run.failures), "rank's line", "ranks' lines")
        verb = "reports" if len(run.failures) == 1 else "report"
        reasons.append(f"{lines} {verb} a failure: {run.failures[0]}")
    alone = max(sum(rank.rank == 0 for rank in run.ranks), run.alone)
    apart = not_reduced(run, gpus) if hosts > 1 else []
    if apart:
        reasons.append(f"{NOT_REDUCED}: {'; '.join(apart)} ({NOT_REDUCED_CAUSE})")
    elif alone > 1:
        reasons.append(f"{ALONE} ({alone} processes each printed rank 0 of a run of 1)")
    figures: dict[str, Any] = {"avg_busbw_gbps": run.avg_busbw, "ranks": len(run.ranks)}
    figures["hosts"] = sorted({rank.host for rank in run.ranks})
    if run.warnings:
        figures["nccl_warnings"] = run.warnings[:3]
    if not run.rows:
        reasons.append("all_reduce_perf printed no table row")
        return NcclVerdict("fail", reasons, figures)
    last = max(run.rows, key=lambda row: row.size)
    busbw = max(last.out_of_place.busbw, last.in_place.busbw)
    figures |= {
        "bytes": last.size,
        "busbw_gbps": busbw,
        "busbw_out_of_place_gbps": last.out_of_place.busbw,
        "busbw_in_place_gbps": last.in_place.busbw,
    }
    if apart:  # nothing crossed between the hosts: no bandwidth to judge, whatever the baseline
        return NcclVerdict("fail", reasons, figures)
    row = baseline_for(gpu_name, gpus, hosts)
    if row is None:
        judged = "fail" if reasons else "unjudged"
        if hosts > 1:  # the hosts' NICs and fabric bound it, not the GPU model alone
            reasons.append(
                f"no sourced all-reduce baseline across {hosts} hosts: bus bandwidth "
                "recorded, not judged"
            )
        else:
            reasons.append(f"no all-reduce baseline for {gpus}x {gpu_name!r}: bandwidth not judged")
        return NcclVerdict(judged, reasons, figures)
    figures["baseline"] = {k: row[k] for k in ("match", "gpus", "hosts", "bytes", "busbw_gbps")}
    if last.size < parse_size(str(row["bytes"])):
        reasons.append(f"the run stopped at {last.size} bytes, below the baseline's {row['bytes']}")
    elif busbw < row["busbw_gbps"]:
        reasons.append(
            f"all-reduce bus bandwidth {busbw} GB/s at {row['bytes']} is below "
            f"{row['busbw_gbps']} GB/s ({gpus}x {row['match']})"
        )
    return NcclVerdict("fail" if reasons else "pass", reasons, figures)


def not_reduced(run: AllReduceRun, gpus: int) -> list[str]:
    """What in a run meant to span `gpus` GPUs on several hosts shows that it did not reduce
    across them, read from its own table and rank lines (none: it did, as far as they say).
    One job prints its header once and lists every rank under it, numbered from 0; processes
    that each ran as a job of their own (nccl-tests without MPI, under mpirun) each print a
    header listing their one rank, rank 0, and a run of one rank moves nothing between GPUs:
    its bus bandwidth is 0 on every row (busbw = algbw x 2(n-1)/n, src/all_reduce.cu). NCCL's
    INFO lines, where asked for and kept, say it too (a communicator of one rank)."""
    found = []
    if run.headers > 1:
        listing = " listing one rank" if len(run.ranks) == run.headers else ""
        found.append(f"{run.headers} processes each printed a header of their own{listing}")
    elif run.headers == 1 and len(run.ranks) == 1 and gpus > 1:
        found.append(f"its one header lists one rank of the group's {gpus} GPUs")
    zeros = sum(rank.rank == 0 for rank in run.ranks)
    if zeros > 1:
        found.append(f"{zeros} processes each printed rank 0")
    if run.alone > 1:
        found.append(f"{run.alone} communicators of one rank (NCCL INFO)")
    halves = [half for row in run.rows for half in (row.out_of_place, row.in_place)]
    if halves and all(half.busbw == 0 for half in halves):
        found.append("bus bandwidth 0 on every row")
    return found


def all_reduce_verdict(
    nccl: Mapping[str, Any], gpu_name: str, gpus: int, hosts: int = 1
) -> NcclVerdict:
    """The verdict on one all_reduce_perf run (its exit status and output, as the acceptance
    facts read them). Not installed where it ran (126, 127): unmeasured. A run that printed
    no table (a hang, a rank's failure) fails with its first failure, NCCL warning or last
    line; a table is judged (judge_all_reduce), and a non-zero exit fails it too."""
    if nccl["exit"] in (126, 127):  # not installed, or refused as writable by others
        reason = _last_line(nccl["output"])
        return NcclVerdict("unmeasured", [reason], {"reason": reason})
    try:
        run = parse_all_reduce(nccl["output"])
    except ValueError:
        why = "timed out" if nccl["exit"] in (124, 137) else f"exit {nccl['exit']}"
        reason = f"all_reduce_perf failed ({why}): {_first_cause(nccl['output'])}"
        return NcclVerdict("fail", [reason], {"reason": reason})
    judged = judge_all_reduce(run, gpu_name, gpus, hosts)
    if nccl["exit"] == 0:
        return judged
    reasons = [*judged.reasons, f"all_reduce_perf exited {nccl['exit']}"]
    return NcclVerdict("fail", reasons, judged.figures)


def with_all_reduce(
    verdict: Verdict, nccl: Mapping[str, Any] | None, gpu_names: Sequence[str]
) -> Verdict:
    """A host's acceptance verdict with its all-reduce step (the Acceptance fact's `nccl`
    reading: all_reduce_perf's exit status and output; None: not run, fewer than two GPUs).
    Not installed where it ran: recorded as unmeasured, the verdict unchanged. A failed or
    hung run, wrong values or a bandwidth below the baseline fail the host."""
    if nccl is None:
        return verdict
    judged = all_reduce_verdict(nccl, gpu_names[0] if gpu_names else "", len(gpu_names))
    figures = {**verdict.figures, "nccl": {"status": judged.status, **judged.figures}}
    if judged.status == "unmeasured":
        return Verdict(verdict.status, list(verdict.reasons), figures)
    status = "fail" if judged.status == "fail" else verdict.status
    return Verdict(status, [*verdict.reasons, *judged.reasons], figures)


def _first_cause(text: str) -> str:
    """What a run that printed no table says went wrong: a rank's failure line, else NCCL's
    first warning, else its last line."""
    lines = [line.strip() for line in text.splitlines()]
    for pattern in (_FAILURE_RE, _WARN_RE):
        found = next((line for line in lines if pattern.search(line)), None)
        if found:
            return found[-300:]
    return _last_line(text)


def _last_line(text: str) -> str:
    line = next((x for x in reversed(text.splitlines()) if x.strip()), "no output")
    return line.strip()[-300:]
