"""The baselines' checks (benchmarks/drift_bench.py), derived from gpurig itself: the reads
`gpurig drift` makes for a spec, each fact's own command on its own, as a one-fact-per-check
pyinfra deploy and an Ansible playbook run them. So the baselines read exactly what drift reads,
in as many remote commands as drift has facts, against drift's one."""

from collections.abc import Mapping
from typing import Any

from gpurig.checks.judge import drift_reads
from gpurig.spec.model import normalise


def checks(spec: Mapping[str, Any]) -> list[str]:
    """One shell command per read `gpurig drift` makes for a host declaring `spec`."""
    return [cls().command(**kwargs) for cls, kwargs in drift_reads(normalise(spec))]
