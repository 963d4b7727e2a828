"""`gpurig accept HOST` and onboarding's last step: measure the host (facts.gpurig_acceptance),
judge it (gpurig.read.acceptance), record the figures with the host and report them.

The record is a JSON file per host under the user's state directory,
`$XDG_STATE_HOME/gpurig/acceptance/<hash of the inventory file's path>/<host>.json`, not the
inventory: the inventory is what the user declares (reviewed, versioned, shared), the figures
are what one run measured; writing them into it would turn every acceptance into a diff.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpurig.facts.gpurig_acceptance import Acceptance, UserAcceptance
from gpurig.facts.gpurig_nvidia import NvidiaGpus
from gpurig.facts.round_trip import Snapshot
from gpurig.fsutil import atomic_write, xdg_dir
from gpurig.read.acceptance import DEFAULT_MARGIN, Verdict, judge_host
from gpurig.read.nccl_tests import message_bytes, with_all_reduce
from gpurig.spec.inventory import Host
from gpurig.spec.model import gpu_container
from gpurig.spec.textsafe import visible
from gpurig.spec.user_scope import is_user

# torch's import and first CUDA call, the timings, all_reduce_perf's 300 s and dcgmi's own 300 s
ACCEPT_TIMEOUT = 1200


@dataclass(frozen=True)
class Accepted:
    """One host's acceptance: where it ran, the verdict, and DCGM's diag when it ran."""

    host: str
    ran_in: str
    verdict: Verdict
    dcgmi: dict[str, Any] | None = None
    when: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    @property
    def failed(self) -> bool:
        return self.verdict.status == "fail"


def judged(host: Host, gpus: list[str], found: dict[str, Any], margin: float) -> Accepted:
    """The Acceptance fact's reading of one host whose GPU query listed `gpus`, judged."""
    spec = host.spec
    _, container = gpu_container(spec)
    result = found["result"]
    if result is None and found["error"]:
        result = {"gpu": None, "reason": found["error"]}
    dcgmi = found["dcgmi"]
    verdict = judge_host(
        gpus,
        result,
        dcgmi["exit"] if dcgmi else None,
        spec["gpu"] == "required",
        margin,
    )
    if gpus:
        verdict = with_all_reduce(verdict, found.get("nccl"), gpus)
    return Accepted(host.name, f"container {container}" if container else "host", verdict, dcgmi)


GPU_QUERY = [(NvidiaGpus, {})]  # the one read before acceptance: which GPUs the host lists


def listed_gpus(state: dict[str, Any]) -> list[str] | None:
    """The GPU names a host's GPU query listed, from its read; None where it printed nothing
    readable."""
    from gpurig.checks.all import ODD_OUTPUT

    read = Snapshot(state)
    if not read.holds(NvidiaGpus, {}):  # the host printed nothing
        return None
    try:
        return [g["name"] for g in read(NvidiaGpus)["listing"] or []]
    except ODD_OUTPUT:
        return None


def measure(host: Host, cache: Path, margin: float = DEFAULT_MARGIN) -> Accepted:
    """Connect (strict host key, sudo as the inventory says), read the GPU query, and measure
    and judge one host (the script and dcgmi run only where a GPU is listed)."""
    from gpurig.remote.drift import probe_hosts  # pyinfra's API: loaded only when a host is read

    spec = host.spec
    engine, container = gpu_container(spec)
    fact = UserAcceptance if is_user(spec) else Acceptance

    def run(pyinfra_host: Any, state: dict[str, Any]) -> dict[str, Any]:
        listed = listed_gpus(state)
        if listed is None:
            return state
        found = Acceptance().default()
        if listed:
            size = message_bytes(listed[0], len(listed))
            found = pyinfra_host.get_fact(
                fact,
                engine=engine,
                container=container,
                gpus=len(listed),
                nccl_bytes=size,
                _timeout=ACCEPT_TIMEOUT,
            )
        return {**state, "gpus": listed, "acceptance": found}

    [probed] = probe_hosts([host], cache, reads=lambda spec: GPU_QUERY, then=run)
    if probed.connect_error is not None or "acceptance" not in (probed.state or {}):
        why = probed.connect_error or "the host's GPU query printed nothing readable"
        return Accepted(host.name, "host", Verdict("fail", [f"cannot read the host: {why}"]))
    return judged(host, probed.state["gpus"], probed.state["acceptance"], margin)


def inventory_dir(host: Host, base: Path | None = None) -> Path:
    """The directory of the records of the inventory file `host` comes from."""
    base = base or xdg_dir("XDG_STATE_HOME", ".local/state", "acceptance")
    return base / hashlib.sha256(str(Path(host.source).resolve()).encode()).hexdigest()[:16]


def record_path(host: Host, base: Path | None = None) -> Path:
    """Where this host's latest acceptance is kept: one directory per inventory file."""
    return inventory_dir(host, base) / f"{host.name}.json"


def as_record(host: Host, accepted: Accepted) -> dict[str, Any]:
    """The JSON record: what ran where, the verdict and every figure measured."""
    return {
        "host": host.name,
        "address": host.address,
        "inventory": str(Path(host.source).resolve()),
        "when": accepted.when,
        "ran_in": accepted.ran_in,
        **asdict(accepted.verdict),
        "dcgmi": accepted.dcgmi,
    }


def save(host: Host, accepted: Accepted, directory: Path | None = None) -> Path:
    """Write the record atomically; returns its path."""
    path = record_path(host, directory)
    atomic_write(path, json.dumps(as_record(host, accepted), indent=2) + "\n", 0o600)
    return path


def _baseline(figures: dict[str, Any]) -> str | None:
    base = figures.get("baseline")
    if not base:
        return None
    return (
        f"{base['model']} peak {base['bf16_tflops']} TFLOPS, {base['copy_gbps']} GB/s "
        f"less {base['margin']:.0%}"
    )


def all_reduce_words(nccl: dict[str, Any]) -> str:
    """The all-reduce step in words: its status, bus bandwidth and baseline, or why not run."""
    if "busbw_gbps" not in nccl:
        return f"{nccl['status']}: {nccl.get('reason')}"
    text = f"{nccl['status']}: busbw {nccl['busbw_gbps']} GB/s at {nccl['bytes']} bytes"
    base = nccl.get("baseline")
    return text + (f" (baseline {base['busbw_gbps']} GB/s)" if base else "")


def summary(accepted: Accepted) -> str:
    """One line: the status and the numbers behind it (host text escaped)."""
    v = accepted.verdict
    text = v.status
    if "bf16_tflops" in v.figures:
        text += (
            f": {v.figures.get('model')}: bf16 {v.figures['bf16_tflops']} TFLOPS, "
            f"copy {v.figures.get('copy_gbps')} GB/s"
        )
        if _baseline(v.figures):
            text += f" (baseline {_baseline(v.figures)})"
    if "nccl" in v.figures:
        text += f"; all-reduce {all_reduce_words(v.figures['nccl'])}"
    if v.reasons and v.status != "pass":
        text += "; " + "; ".join(v.reasons)
    return visible(f"{text} [ran on the {accepted.ran_in}]")


def render(host: Host, accepted: Accepted, fmt: str) -> str:
    """The report: one line per figure, or the JSON record."""
    if fmt == "json":
        return json.dumps(as_record(host, accepted), indent=2) + "\n"
    v = accepted.verdict
    rows = [("host", host.name), ("status", v.status), ("ran on", accepted.ran_in)]
    for key in ("model", "torch", "cuda", "matmul_max_rel_error", "bf16_tflops", "copy_gbps"):
        if key in v.figures:
            rows.append((key, str(v.figures[key])))
    if _baseline(v.figures):
        rows.append(("baseline", str(_baseline(v.figures))))
    if "nccl" in v.figures:
        rows.append(("nccl all-reduce", all_reduce_words(v.figures["nccl"])))
    if accepted.dcgmi:
        rows.append(("dcgmi diag -r 1", f"exit {accepted.dcgmi['exit']}"))
    rows += [("reason", r) for r in v.reasons]
    width = max(len(k) for k, _ in rows)
    return "".join(f"{k:<{width}}  {visible(text)}\n" for k, text in rows)
