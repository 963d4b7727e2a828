"""Drift results for Prometheus: one `*.prom` file for node_exporter's textfile collector.

node_exporter reads every `*.prom` file in its `--collector.textfile.directory` at each scrape,
in the text exposition format, without timestamps (its README, "Textfile Collector"): the file
is written beside its final name and renamed, so a scrape never reads half of it. Names follow
Prometheus' naming practice: the `gpurig_` prefix, base units in the name (`_seconds`,
`_timestamp_seconds`), a `_build_info` series of value 1.

Labels carry only what gpurig itself names: a finding's id, its severity, the inventory's host
name (validated when the inventory is loaded) and gpurig's version. A finding's message,
expected and actual values quote the host and can hold anything: they never reach a label.

Every id a run can report (the plans' CHANGE_IDS and the checks' CHECK_IDS) is written for both
severities, 0 where the host did not have it, so an alert or a panel on one id always has its
series (as node_exporter's own `node_systemd_unit_state` writes every state of a unit). A host
gpurig could not read has no zeros: nothing was judged there, and `last_run_success` is 0.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import get_args

from gpurig import __version__
from gpurig.checks.all import NOT_READ, known_ids
from gpurig.fsutil import atomic_write
from gpurig.named_tuple import NamedTuple
from gpurig.safe_path import walk
from gpurig.spec.finding import HostReport, Severity

FILENAME = "gpurig_drift.prom"
SEVERITIES: tuple[str, ...] = get_args(Severity)

Labels = Mapping[str, str]


class Family(NamedTuple):
    """One metric: its name, HELP text and samples (labels, value), all of type gauge."""

    name: str
    help: str
    samples: tuple[tuple[Labels, float], ...]


def checked(report: HostReport) -> bool:
    """Whether the host was read and every concern judged (the run succeeded there)."""
    return report.reachable and not any(f.id in NOT_READ for f in report.findings)


def families(
    reports: Sequence[HostReport],
    finished: float,
    duration: float,
    host_label: bool,
    ids: Sequence[str] | None = None,
    extra: Sequence[Family] = (),
) -> list[Family]:
    """The run's metrics. `host_label` (the controller) labels each host's series with its
    name; without it (`--local`, one file per node) node_exporter's target names the host.
    `ids`: the ids the run checked, each written (0 if not found); every known id if None (a
    node contract's mode checks fewer). `extra`: a node contract's own (contract_families)."""
    if not host_label and len(reports) != 1:
        raise ValueError("without a host label a file holds exactly one host")
    per_id: list[tuple[Labels, float]] = []
    per_severity: list[tuple[Labels, float]] = []
    success: list[tuple[Labels, float]] = []
    ids = known_ids() if ids is None else ids
    for report in reports:
        host = {"host": report.name} if host_label else {}
        # A finding counts under each id it stands for (a recreated container's fields).
        found = Counter((fid, f.severity) for f in report.findings for fid in f.ids)
        severities = Counter(f.severity for f in report.findings)
        reported = {fid for fid, _ in found}
        listed = sorted(reported | set(ids)) if checked(report) else sorted(reported)
        per_id += [
            ({**host, "id": fid, "severity": severity}, found[fid, severity])
            for fid in listed
            for severity in SEVERITIES
        ]
        per_severity += [
            ({**host, "severity": severity}, severities[severity]) for severity in SEVERITIES
        ]
        success.append((host, 1 if checked(report) else 0))
    return [
        Family(
            "gpurig_drift_findings",
            "Findings of this id and severity in the last drift run; 0: checked, none found.",
            tuple(per_id),
        ),
        Family(
            "gpurig_drift_findings_by_severity",
            "Findings of this severity in the last drift run.",
            tuple(per_severity),
        ),
        Family(
            "gpurig_drift_last_run_success",
            "1 if the last drift run read and judged the host, 0 if it could not.",
            tuple(success),
        ),
        Family(
            "gpurig_drift_last_run_timestamp_seconds",
            "When the last drift run finished, in seconds since the Unix epoch.",
            (({}, round(finished, 3)),),
        ),
        Family(
            "gpurig_drift_last_run_duration_seconds",
            "How long the last drift run took, reading and judging every host.",
            (({}, round(duration, 3)),),
        ),
        Family(
            "gpurig_build_info",
            "The gpurig that wrote this file; the value is always 1.",
            (({"version": __version__}, 1),),
        ),
        *extra,
    ]


def contract_families(withheld: bool | None, acknowledged: Mapping[str, float]) -> list[Family]:
    """A node contract's own metrics: whether it withheld its node's drain (None: a mode that
    never drains writes none), and when each kernel-log id was last acknowledged this boot
    (`gpurig ack`, gpurig.node.ack)."""
    found = []
    if withheld is not None:
        found.append(
            Family(
                "gpurig_drain_withheld",
                "1 if the last run withheld its node's drain: past the drain budget, or past "
                "the nodes drained for one id (a spec error?); 0 otherwise.",
                (({}, 1 if withheld else 0),),
            )
        )
    found.append(
        Family(
            "gpurig_acknowledged_timestamp_seconds",
            "When `gpurig ack` last said this id's kernel-log events were handled, this boot, "
            "in seconds since the Unix epoch; earlier events are not reported again.",
            tuple(({"id": fid}, round(when, 3)) for fid, when in sorted(acknowledged.items())),
        )
    )
    return found


def escape_label(value: str) -> str:
    """A label value as the text format quotes it: backslash, double quote, newline escaped."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _sample(name: str, labels: Labels, value: float) -> str:
    inner = ",".join(f'{key}="{escape_label(text)}"' for key, text in labels.items())
    return f"{name}{{{inner}}} {_number(value)}" if inner else f"{name} {_number(value)}"


def render(
    reports: Sequence[HostReport],
    finished: float,
    duration: float,
    host_label: bool,
    ids: Sequence[str] | None = None,
    extra: Sequence[Family] = (),
) -> str:
    """The text exposition format: each family's HELP and TYPE lines, then its samples."""
    lines: list[str] = []
    for family in families(reports, finished, duration, host_label, ids, extra):
        lines += [f"# HELP {family.name} {_escape_help(family.help)}",
                  f"# TYPE {family.name} gauge"]  # fmt: skip
        lines += [_sample(family.name, labels, value) for labels, value in family.samples]
    return "\n".join(lines) + "\n"


def written(
    directory: str | os.PathLike[str],
    reports: Sequence[HostReport],
    duration: float,
    host_label: bool,
    ids: Sequence[str] | None = None,
    extra: Sequence[Family] = (),
) -> bool:
    """DIR/gpurig_drift.prom for node_exporter, for the CLI and the node contracts alike;
    False (said on stderr) when it cannot be written."""
    text = render(reports, time.time(), duration, host_label, ids, extra)
    try:
        write(directory, text)
    except OSError as exc:
        print(f"gpurig drift: --textfile {directory}: {exc.strerror or exc}", file=sys.stderr)
        return False
    return True


def write(directory: str | os.PathLike[str], text: str) -> str:
    """`directory/gpurig_drift.prom`, replaced atomically: the temp file (`.gpurig_drift.prom.*`,
    which the collector's `*.prom` never matches) lives in the same directory, then is renamed.
    Mode 0644: node_exporter runs as its own user. As root, only in a directory root alone can
    change (gpurig.safe_path), at its walked path: never through another account's link."""
    if os.geteuid() == 0:
        walked = walk(str(directory))
        if not walked.root_only:
            why = walked.refused or f"uid {walked.owner} can change it"
            raise PermissionError(errno.EPERM, f"root writes only where root alone can: {why}")
        directory = walked.checked
    path = os.path.join(directory, FILENAME)
    atomic_write(path, text, 0o644)
    return path
