"""NCCL all-reduce acceptance: nccl-tests' `all_reduce_perf` output parsed (its ranks, its
table's out-of-place and in-place columns with #wrong, the out-of-bounds and "Avg bus
bandwidth" lines) and judged against a per-GPU-model baseline (gpurig/data/nccl_baselines.yaml).
Pure functions over text, tested on outputs recorded on real machines (tests/fixtures/gpu).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gpurig.data.tables import table
from gpurig.read.acceptance import Verdict
from gpurig.spec.units import parse_size


@dataclass(frozen=True)
class Half:
    """One half of a table row (out-of-place or in-place): time in µs, algorithm and bus
    bandwidth in GB/s, and #wrong (None: 'N/A', or a build before 2.10 that printed its max
    error there instead of a count)."""

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


_RANK_RE = re.compile(
    r"Rank\s+(\d+)(?:\s+Group\s+\d+)?\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s+(.+?)\s*$"
)
_OOB_RE = re.compile(r"Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")
_AVG_RE = re.compile(r"Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")


def _half(cells: Sequence[str]) -> Half:
    time_us, algbw, busbw, wrong = cells
    if wrong != "N/A":
        float(wrong)  # a count, or an older build's max error: a number either way
    count = int(wrong) if wrong.isdigit() else None
    return Half(float(time_us), float(algbw), float(busbw), count)


def _row(cells: list[str]) -> Row | None:
    """A table row: size count type redop [root] then two halves of four; None otherwise."""
    if len(cells) == 13:  # nccl-tests 2.10+ print a root column (-1 for all-reduce)
        del cells[4]
    if len(cells) != 12 or not (cells[0].isdigit() and cells[1].isdigit()):
        return None
    try:
        return Row(
            int(cells[0]), int(cells[1]), cells[2], cells[3], _half(cells[4:8]), _half(cells[8:])
        )
    except ValueError:
        return None


def parse_all_reduce(text: str) -> AllReduceRun:
    """all_reduce_perf's output, whatever else is interleaved with it (NCCL INFO lines, MPI
    warnings). Raises ValueError when it holds neither a table row nor an 'Avg bus bandwidth'
    line: the test did not run (not installed, CUDA or NCCL failed first)."""
    ranks, rows = [], []
    out_of_bounds = avg = None
    for line in text.splitlines():
        if (rank := _RANK_RE.search(line)) and line.lstrip().startswith("#"):
            ranks.append(Rank(int(rank[1]), rank[2], int(rank[3]), rank[4]))
        elif match := _OOB_RE.search(line):
            out_of_bounds = int(match[1])
        elif match := _AVG_RE.search(line):
            avg = float(match[1])
        elif not line.lstrip().startswith("#") and (row := _row(line.split())):
            rows.append(row)
    if not rows and avg is None:
        raise ValueError("no all_reduce_perf table row or 'Avg bus bandwidth' line")
    return AllReduceRun(ranks, rows, out_of_bounds, avg)


def baseline_for(gpu_name: str, gpus: int) -> dict[str, Any] | None:
    """The baseline row for this many GPUs of this model (the longest matching `match`)."""
    rows = [
        row
        for row in table("nccl_baselines.yaml")["models"]
        if row["match"].lower() in gpu_name.lower() and row["gpus"] == gpus
    ]
    return max(rows, key=lambda row: len(row["match"]), default=None)


def message_bytes(gpu_name: str, gpus: int) -> int:
    """The message size to run at: the baseline's, else the table's default."""
    row = baseline_for(gpu_name, gpus)
    return parse_size(str(row["bytes"] if row else table("nccl_baselines.yaml")["default_bytes"]))


Status = Literal["pass", "fail", "unjudged"]


@dataclass(frozen=True)
class NcclVerdict:
    """The all-reduce step's conclusion and the figures behind it (recorded with the host)."""

    status: Status
    reasons: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


def judge_all_reduce(run: AllReduceRun, gpu_name: str, gpus: int) -> NcclVerdict:
    """Wrong results fail whatever the speed (#wrong above 0 in either half, or out-of-bounds
    values); then the bus bandwidth at the largest size (the better of out-of-place and
    in-place) against the model's baseline for this many GPUs, where one exists."""
    reasons = []
    wrong = sum(half.wrong or 0 for row in run.rows for half in (row.out_of_place, row.in_place))
    if wrong:
        reasons.append(f"all_reduce_perf found {wrong} wrong values (#wrong)")
    if run.out_of_bounds:
        reasons.append(f"all_reduce_perf found {run.out_of_bounds} out-of-bounds values")
    figures: dict[str, Any] = {"avg_busbw_gbps": run.avg_busbw, "ranks": len(run.ranks)}
    figures["hosts"] = sorted({rank.host for rank in run.ranks})
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
    row = baseline_for(gpu_name, gpus)
    if row is None:
        reasons.append(f"no all-reduce baseline for {gpus}x {gpu_name!r}: bandwidth not judged")
        return NcclVerdict("fail" if len(reasons) > 1 else "unjudged", reasons, figures)
    figures["baseline"] = {k: row[k] for k in ("match", "gpus", "bytes", "busbw_gbps")}
    if last.size < parse_size(str(row["bytes"])):
        reasons.append(f"the run stopped at {last.size} bytes, below the baseline's {row['bytes']}")
    elif busbw < row["busbw_gbps"]:
        reasons.append(
            f"all-reduce bus bandwidth {busbw} GB/s at {row['bytes']} is below "
            f"{row['busbw_gbps']} GB/s ({gpus}x {row['match']})"
        )
    return NcclVerdict("fail" if reasons else "pass", reasons, figures)


def with_all_reduce(
    verdict: Verdict, nccl: Mapping[str, Any] | None, gpu_names: Sequence[str]
) -> Verdict:
    """A host's acceptance verdict with its all-reduce step (the Acceptance fact's `nccl`
    reading: all_reduce_perf's exit status and output; None: not run, fewer than two GPUs).
    Not installed where it ran: recorded as unmeasured, the verdict unchanged. A failed or
    hung run, wrong values or a bandwidth below the baseline fail the host."""
    if nccl is None:
        return verdict
    figures = dict(verdict.figures)
    reasons = list(verdict.reasons)
    if nccl["exit"] in (126, 127):  # not installed, or refused as writable by others
        figures["nccl"] = {"status": "unmeasured", "reason": _last_line(nccl["output"])}
        return Verdict(verdict.status, reasons, figures)
    try:
        run = parse_all_reduce(nccl["output"])
    except ValueError:
        why = "timed out" if nccl["exit"] in (124, 137) else f"exit {nccl['exit']}"
        reason = f"all_reduce_perf failed ({why}): {_last_line(nccl['output'])}"
        figures["nccl"] = {"status": "fail", "reason": reason}
        return Verdict("fail", [*reasons, reason], figures)
    judged = judge_all_reduce(run, gpu_names[0] if gpu_names else "", len(gpu_names))
    figures["nccl"] = {"status": judged.status, **judged.figures}
    if nccl["exit"] != 0:
        judged.reasons.append(f"all_reduce_perf exited {nccl['exit']}")
    if judged.status == "fail" or nccl["exit"] != 0:
        return Verdict("fail", [*reasons, *judged.reasons], figures)
    return Verdict(verdict.status, [*reasons, *judged.reasons], figures)


def _last_line(text: str) -> str:
    line = next((x for x in reversed(text.splitlines()) if x.strip()), "no output")
    return line.strip()[-300:]
