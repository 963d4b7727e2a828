"""Acceptance of a GPU host: measure once (ACCEPTANCE_SCRIPT, run where torch is), judge purely.

The script prints one JSON object: CUDA initialised, a float64 matmul checked against the CPU,
bf16 matmul TFLOPS and device-to-device copy bandwidth. `judge` compares that with the model's
datasheet peaks (gpurig/data/gpu_baselines.yaml) less a margin, so a throttled, mis-binned or
mis-sold GPU fails onboarding with its numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gpurig.data.tables import table

# Run with `python3 -c` inside the declared container (or on the host). Without torch or
# without a GPU it prints {"gpu": false, "reason": ...}; on any other failure {"gpu": null}.
ACCEPTANCE_SCRIPT = """\
import json, time
def run():
    try:
        import torch
    except ImportError as exc:
        return {"gpu": False, "reason": f"torch not importable: {exc}"}
    if not torch.cuda.is_available():
        return {"gpu": False, "reason": "torch.cuda.is_available() is False", "torch": torch.__version__}
    dev = torch.device("cuda")
    out = {"gpu": True, "torch": torch.__version__, "cuda": torch.version.cuda,
           "model": torch.cuda.get_device_name(0)}
    a = torch.randn(256, 256, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    ref = a @ a.T
    got = (a.to(dev) @ a.to(dev).T).cpu()
    out["matmul_max_rel_error"] = float((got - ref).abs().max() / ref.abs().max())
    def timed(fn, reps):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / reps
    n = 8192
    x = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    y = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    out["bf16_tflops"] = round(2 * n**3 / timed(lambda: x @ y, 20) / 1e12, 1)
    del x, y
    src = torch.empty(2**28, device=dev)
    dst = torch.empty_like(src)
    out["copy_gbps"] = round(2 * src.nbytes / timed(lambda: dst.copy_(src), 20) / 1e9, 1)
    return out
try:
    result = run()
except Exception as exc:
    result = {"gpu": None, "reason": f"{type(exc).__name__}: {exc}"}
print(json.dumps(result))
"""  # noqa: E501 (kept byte-identical to the script recorded on the H100)

# A healthy H100 SXM measured 790-793 TFLOPS (80 % of peak) and 2983-3001 GB/s (89 %) with
# the script above (tests/fixtures/gpu/acceptance_h100_580.159.04_vm.jsonl). 35 % below peak
# leaves room for cuBLAS and clock variation yet fails a GPU stuck at reduced clocks or power.
DEFAULT_MARGIN = 0.35
# float64 on GPU and CPU agree to rounding; a wrong answer is off by far more than this.
MAX_REL_ERROR = 1e-9

# "unmeasured": the host has a GPU but no torch where the script ran (no declared container with
# GPUs, and none on the host), so nothing could be timed; reported, not failed.
Status = Literal["pass", "fail", "no-gpu", "no-baseline", "unmeasured"]


@dataclass(frozen=True)
class Verdict:
    """What acceptance concluded, and the numbers behind it (recorded with the host)."""

    status: Status
    reasons: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


def baselines() -> list[dict[str, Any]]:
    """gpurig/data/gpu_baselines.yaml's models, loaded once."""
    return table("gpu_baselines.yaml")["models"]


def baseline_for(model: str) -> dict[str, Any] | None:
    """The table row whose `match` is the longest substring of this GPU name, else None."""
    rows = [row for row in baselines() if row["match"].lower() in model.lower()]
    return max(rows, key=lambda row: len(row["match"]), default=None)


def parse_result(text: str) -> dict[str, Any]:
    """The script's JSON line (the last line that parses as an object); ValueError if none."""
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise ValueError("the acceptance script printed no JSON object")


def judge(result: Mapping[str, Any], margin: float = DEFAULT_MARGIN) -> Verdict:
    """Judge one acceptance result against its model's baseline less `margin` (0..1)."""
    if not 0 <= margin < 1:
        raise ValueError(f"margin {margin!r} must be a fraction in [0, 1)")
    if result.get("gpu") is False:
        return Verdict("no-gpu", [str(result.get("reason") or "no GPU")], dict(result))
    if result.get("gpu") is None:
        return Verdict("fail", [f"acceptance failed: {result.get('reason')}"], dict(result))
    reasons = []
    error = result.get("matmul_max_rel_error")
    if not isinstance(error, int | float) or error > MAX_REL_ERROR:
        reasons.append(f"matmul gives a wrong answer: max relative error {error}")
    row = baseline_for(str(result.get("model") or ""))
    figures = dict(result)
    if row is None:
        reasons.append(f"no baseline for {result.get('model')!r}: throughput not judged")
        return Verdict("fail" if len(reasons) > 1 else "no-baseline", reasons, figures)
    figures["baseline"] = {"model": row["model"], "margin": margin}
    for key, unit in (("bf16_tflops", "TFLOPS"), ("copy_gbps", "GB/s")):
        floor = row[key] * (1 - margin)
        figures["baseline"][key] = row[key]
        measured = result.get(key)
        if not isinstance(measured, int | float) or measured < floor:
            reasons.append(
                f"{key} {measured} {unit} is below {floor:.1f} {unit} "
                f"({row['model']} peak {row[key]} {unit} less {margin:.0%})"
            )
    return Verdict("fail" if reasons else "pass", reasons, figures)


def judge_host(
    gpus: Sequence[str],
    result: Mapping[str, Any] | None,
    dcgmi_exit: int | None,
    required: bool,
    margin: float = DEFAULT_MARGIN,
) -> Verdict:
    """One host's acceptance: its GPUs' names (from NvidiaGpus), the script's result (None: not
    run) and the exit status of `dcgmi diag -r 1` (None: DCGM not installed). dcgmi is judged
    by its exit status alone: it returns DCGM_ST_NVVS_ERROR (-30, exit 226) when any test
    reports an error and DCGM_ST_NVVS_ISOLATE_ERROR for one that needs the GPU isolated
    (NVIDIA/DCGM dcgmi/Diag.cpp at 72fa3feaa67d; 226 as seen by users: NVIDIA/DCGM issue #158).
    Its table is kept in the record, not parsed: no real `-r 1` recording was found to test a
    parser on."""
    if not gpus:
        why = "no NVIDIA GPU on the host (nvidia-smi is missing or lists none)"
        if required:
            return Verdict("fail", [f"{why}, and the spec says gpu: required"])
        return Verdict("no-gpu", [why])
    if result is None:
        return Verdict("fail", ["the acceptance script printed no result"], {"gpus": list(gpus)})
    if result.get("gpu") is False and "torch" not in result:
        reason = f"{result.get('reason')}: nothing timed (declare a container with GPUs, or "
        return Verdict("unmeasured", [reason + "install torch on the host)"], dict(result))
    if result.get("gpu") is False:
        reason = f"CUDA does not initialise: {result.get('reason')} (torch {result.get('torch')})"
        return Verdict("fail", [reason], dict(result))
    verdict = judge(result, margin)
    if dcgmi_exit in (None, 0):
        return verdict
    reasons = [*verdict.reasons, f"dcgmi diag -r 1 failed (exit {dcgmi_exit}); see its output"]
    return Verdict("fail", reasons, verdict.figures)
