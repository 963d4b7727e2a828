"""NCCL all-reduce across the hosts of an inventory group (a multi-node job's own test): nccl-tests'
`all_reduce_perf`, an MPI build, launched by Open MPI's `mpirun` from the group's first host,
which starts the other hosts' ranks over SSH. Pure functions: whether a group may run it (from
the specs before any host is touched, then from the GPUs each host lists), where it runs (the
first host's GPU container, or an image the spec pins by digest), the command line (every host
name and GPU count checked, every word shell-quoted) and the verdict (gpurig.read.nccl_tests
parses and judges; across hosts no baseline is sourced, so the bandwidth is recorded).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpurig.read.nccl_tests import NcclVerdict, all_reduce_verdict
from gpurig.spec.container import gpu_args
from gpurig.spec.model import gpu_container
from gpurig.spec.words import counted

# mpirun's SSH launch on every host, NCCL's bootstrap across them and one message size: a
# hang (the failure this looks for) must not hang acceptance.
GROUP_TIMEOUT = 600
# GPUs one host may offer a run: a bound on a count that a host's own listing gave (an HGX
# board has 8; nvidia-smi lists each GPU once).
MAX_GPUS = 64
# Printed by every rank (mpirun -x): NCCL says nothing of a failure unless asked to.
NCCL_DEBUG = "NCCL_DEBUG=WARN"
IMAGE_KEY = "acceptance.nccl_image"
EVERY_HOST = "the all-reduce across hosts runs only where every host of the group has GPUs"
# A host name or IPv4 address as mpirun's -H takes it (HOST:SLOTS): labels of letters,
# digits and inner hyphens; nothing that starts like an option or holds a colon or a space.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_MPI_HOST = re.compile(rf"(?=.{{1,253}}\Z){_LABEL}(?:\.{_LABEL})*\Z")


class Refused(ValueError):
    """The group cannot run the all-reduce; the message says why and what to change."""


@dataclass(frozen=True)
class Member:
    """One host of the group: its inventory name, the address mpirun names it by, and the
    GPUs its GPU query listed."""

    name: str
    address: str
    gpus: tuple[str, ...]


def place(spec: Mapping[str, Any]) -> tuple[str, str | None, str | None]:
    """(engine, container, image) where mpirun runs on the group's first host: its first GPU
    container (`docker exec`), else the image `acceptance.nccl_image` pins (`run --rm`).
    Refused where neither is declared: gpurig never picks an image itself."""
    engine, container = gpu_container(spec)
    if engine and container:
        return engine, container, None
    image = (spec.get("acceptance") or {}).get("nccl_image")
    if image and spec["engine"] in ("docker", "podman"):
        return spec["engine"], None, image
    raise Refused(
        "no place to run mpirun on the group's first host: declare a container given GPUs "
        f"(spec.containers) or set spec.{IMAGE_KEY} to an image holding an MPI build of "
        "nccl-tests, pinned by digest (NAME@sha256:...), with spec.engine docker or podman"
    )


def check_specs(group: str, hosts: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    """Refuse, before any host is touched, a group that cannot run it: fewer than two hosts,
    a host whose spec says `gpu: absent`, or no place to run on its first host."""
    if len(hosts) < 2:
        raise Refused(
            f"group {group} has {counted(len(hosts), 'host')}: an all-reduce across hosts needs "
            "two or more (gpurig accept HOST runs one host's own)"
        )
    absent = [name for name, spec in hosts if spec["gpu"] == "absent"]
    if absent:
        raise Refused(
            f"group {group}: {', '.join(absent)} declare{'s' * (len(absent) == 1)} "
            f"gpu: absent; {EVERY_HOST}"
        )
    place(hosts[0][1])


def check_listed(group: str, members: Sequence[Member]) -> None:
    """Refuse a group one of whose hosts lists no GPU (what each host's GPU query found)."""
    bare = [m.name for m in members if not m.gpus]
    if bare:
        raise Refused(
            f"group {group}: {', '.join(bare)} list{'s' * (len(bare) == 1)} no GPU; {EVERY_HOST}"
        )


def mpirun_argv(hosts: Sequence[tuple[str, int]], nbytes: int) -> list[str]:
    """`mpirun -H a:N,b:M -np N+M ... all_reduce_perf -b S -e S -f 2 -g 1 -c 1`: one rank per
    GPU, each host named by its address with its GPU count as slots. Raises ValueError on an
    address mpirun's -H cannot take or a count out of bounds: nothing unchecked reaches the
    command line."""
    if len(hosts) < 2:
        raise ValueError(f"an all-reduce across hosts needs two hosts or more, not {len(hosts)}")
    slots = []
    for address, gpus in hosts:
        if not isinstance(address, str) or not _MPI_HOST.match(address):
            raise ValueError(
                f"{str(address)[:80]!r} is not a host name or IPv4 address mpirun's -H can take"
            )
        if type(gpus) is not int or not 1 <= gpus <= MAX_GPUS:
            raise ValueError(f"{address}: {gpus!r} GPUs is not a count from 1 to {MAX_GPUS}")
        slots.append(f"{address}:{gpus}")
    if len({address.lower() for address, _ in hosts}) != len(hosts):
        raise ValueError("a host is named twice in the group")
    if type(nbytes) is not int or not 1 <= nbytes <= 1 << 40:
        raise ValueError(f"{nbytes!r} bytes is not a message size from 1 to 1 TiB")
    size = str(nbytes)
    return [
        "mpirun", "--allow-run-as-root", "--bind-to", "none",
        "-H", ",".join(slots), "-np", str(sum(g for _, g in hosts)), "-x", NCCL_DEBUG,
        "all_reduce_perf", "-b", size, "-e", size, "-f", "2", "-g", "1", "-c", "1",
    ]  # fmt: skip


def launch(argv: Sequence[str], engine: str, container: str | None, image: str | None) -> str:
    """The shell command running `argv` where `place()` said: in the container, or in a
    throwaway container of the pinned image on the host's network and IPC namespaces with
    every GPU (what NCCL needs to reach the NICs and the other local ranks)."""
    if container:
        words = [engine, "exec", container, *argv]
    elif image:
        run = ["run", "--rm", "--network", "host", "--ipc", "host", *gpu_args("all", engine)]
        words = [engine, *run, image, *argv]
    else:
        raise ValueError("neither a container nor an image to run mpirun in")
    return shlex.join(words)


def judge_group(nccl: Mapping[str, Any] | None, members: Sequence[Member]) -> NcclVerdict:
    """The group's verdict: the run judged as one all_reduce_perf run of all its GPUs on
    len(members) hosts (no baseline across hosts: correctness judged, bandwidth recorded),
    and a run whose ranks do not cover every GPU of every host fails."""
    if nccl is None:
        reason = "the all-reduce printed no exit status (cut short)"
        return NcclVerdict("fail", [reason], {"reason": reason})
    gpus = sum(len(m.gpus) for m in members)
    judged = all_reduce_verdict(nccl, members[0].gpus[0], gpus, len(members))
    ranks = judged.figures.get("ranks")
    hosts = judged.figures.get("hosts") or []
    # No rank lines kept (a long output's start is cut), or they cover every GPU of every host
    if not ranks or (ranks == gpus and len(hosts) == len(members)):
        return judged
    reason = (
        f"the run had {counted(ranks, 'rank')} on {counted(len(hosts), 'host')}; the group has "
        f"{counted(gpus, 'GPU')} on {counted(len(members), 'host')}"
    )
    return NcclVerdict("fail", [*judged.reasons, reason], judged.figures)
