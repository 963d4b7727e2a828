"""How often the node contracts' fast subset starts nvidia-smi, and that asking once loses
nothing. Each nvidia-smi starts NVML (on a node without persistence mode, hundreds of ms to
seconds a call), so the GPU query asks once and runs `-L` and `--version` only where its rows
leave out what they say (facts/gpurig_nvidia.py). The equalities are held on recordings from
real machines: where one machine recorded the query, -L and --version, the fact's value from
the query alone is the value from all three."""

from __future__ import annotations

import csv
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpurig.checks.judge import drift_reads
from gpurig.facts.gpurig_nvidia import NvidiaGpus
from gpurig.facts.round_trip import HostState, read_key
from gpurig.node.modes import mode
from gpurig.read import gpu_parse
from gpurig.spec.model import normalise
from tests.unit.gpu_fixtures import read_fixture, recorded_command

QUERY_ARGS = gpu_parse.QUERY_GPU_COMMAND.removeprefix("nvidia-smi ")


def our_rows(name: str) -> str:
    """The rows of the GPU query gpurig runs (noheader, nounits), from a recorded query with a
    header: the recorded values of gpurig's fields, picked by name in gpurig's order (a
    composition of one recording: columns chosen, no value changed). A recording of gpurig's
    own query is returned as it is."""
    text = read_fixture(name)
    if recorded_command(name) == gpu_parse.QUERY_GPU_COMMAND:
        return text
    lines = [line for line in text.splitlines() if line.strip()]
    header, *rows = list(csv.reader(lines, skipinitialspace=True))
    names = [re.sub(r" \[.+\]$", "", cell) for cell in header]
    picked = []
    for row in rows:
        values = dict(zip(names, row, strict=True))
        cells = [re.sub(r" (MiB|W)$", "", values[field]) for field in gpu_parse.QUERY_GPU_FIELDS]
        picked.append(", ".join(cells))
    return "\n".join(picked) + "\n"


# One machine each: (its query, its -L, its --version).
SAME_MACHINE = {
    "h100 580.159.04": (
        "nvidia-smi_query-gpu_csv-noheader_h100_580.159.04_health-fields.txt",
        "nvidia-smi-L_h100_580.159.04_vm.txt",
        "nvidia-smi--version_h100_580.159.04_vm.txt",
    ),
    "h200 590.48.01": (
        "nvidia-smi_query-gpu_csv_h200_590.48.01.txt",
        "nvidia-smi-L_h200_590.48.01.txt",
        "nvidia-smi--version_h200_590.48.01.txt",
    ),
    "l40s 595.80": (
        "nvidia-smi_query-gpu_csv_l40s_595.80.txt",
        "nvidia-smi-L_l40s_595.80.txt",
        "nvidia-smi--version_l40s_595.80.txt",
    ),
    # 610's --version says the driver only on its KMD line; the query's driver_version is it.
    "rtx2080super 610.57.04": (
        "nvidia-smi_query-gpu_csv_rtx2080super_610.57.04.txt",
        "nvidia-smi-L_rtx2080super_610.57.04.txt",
        "nvidia-smi_version_610.57.04.txt",
    ),
}
MIG_MACHINE = (  # an H100 in MIG mode: only -L lists its slices
    "nvidia-smi_query-gpu_csv_h100-mig_590.48.01.txt",
    "nvidia-smi-L_h100-80gb-mig_590.48.01.txt",
    "nvidia-smi_version_590.48.01.txt",
)


def stand_in(directory: Path, answers: dict[str, str]) -> Path:
    """A stand-in `nvidia-smi` in `directory` that appends its arguments to directory/calls and
    prints the recorded output for them (`answers`: arguments -> output); anything else it was
    not recorded for fails."""
    calls = directory / "calls"
    calls.touch()
    calls.chmod(0o666)
    cases = ""
    for index, (args, output) in enumerate(answers.items()):
        (directory / f"out{index}").write_text(output)
        cases += f"  {shlex.quote(args)}) cat {directory / f'out{index}'} ;;\n"
    tool = directory / "nvidia-smi"
    tool.write_text(
        f'#!/bin/sh\nprintf \'%s\\n\' "$*" >> {calls}\ncase "$*" in\n{cases}'
        '  *) echo "not recorded: $*"; exit 9 ;;\nesac\n'
    )
    tool.chmod(0o755)
    return calls


def answers_of(query: str, listing: str, version: str, rest: str | None = None) -> dict[str, str]:
    """The stand-in's answers for one machine's query rows, -L and --version; the health,
    process and NVLink calls answer `rest`, else the H100 VM's recordings (their output is not
    what these tests count)."""
    apps = "--query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits"
    if rest is not None:
        return {QUERY_ARGS: query, "-L": listing, "--version": version, "-q -x": rest,
                apps: rest, "nvlink -s": rest}  # fmt: skip
    return {
        QUERY_ARGS: query,
        "-L": listing,
        "--version": version,
        "-q -x": read_fixture("nvidia-smi-q-x_h100_580.159.04_vm.xml"),
        apps: "",
        "nvlink -s": read_fixture("nvidia-smi_nvlink-s_h100-single_580.159.04_vm.txt"),
    }


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory `nobody` may read (tmp_path's parents are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="gpurig-gpu-calls-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def run_as_reader(script: str, directory: Path | None) -> list[str]:
    """`script` run by /bin/sh with `directory` first on PATH. As root the read sets the
    system's own PATH, so root runs it as `nobody`, which keeps the caller's PATH."""
    command = ["/bin/sh", "-c", script]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv cannot run the read as another account")
        command = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *command]
    path = os.environ["PATH"] if directory is None else f"{directory}:{os.environ['PATH']}"
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd="/",
                          env={**os.environ, "PATH": path})  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def fast_subset_calls(mode_name: str, directory: Path | None) -> tuple[list[str], dict]:
    """The nvidia-smi calls (arguments, in order) the mode's one read makes with the stand-in
    in `directory` (none: no nvidia-smi there), and the GPU query's value it read."""
    reads = drift_reads(normalise({}), mode(mode_name).scope)
    state = HostState()
    output = run_as_reader(state.command(reads, mode(mode_name).scope.bound), directory)
    values = state.process(output)
    calls = (directory / "calls").read_text().splitlines() if directory else []
    return calls, values[read_key(NvidiaGpus, {})]


def h100x8_rows() -> tuple[str, str]:
    """An 8-GPU H100 node's query rows and -L, composed of recordings (no 8-GPU run of gpurig's
    query is recorded): each GPU's index (its order), PCI id, name, UUID, serial and MIG mode,
    and the driver, from the recorded `nvidia-smi -q` of an 8x H100 node (535.161.08); the
    other columns from the H100 VM's recorded row of the same query."""
    text = read_fixture("nvidia-smi-q_h100x8_535.161.08.txt")
    driver = re.search(r"^Driver Version\s+: (\S+)", text, re.M)[1]
    (vm,) = gpu_parse.parse_query_gpu_csv(read_fixture(SAME_MACHINE["h100 580.159.04"][0]))
    rows, listing = [], []
    for index, (pci, fields) in enumerate(gpu_parse.parse_smi_q_text(text).items()):
        name, uuid = fields["Product Name"], fields["GPU UUID"]
        row = {**vm, "index": str(index), "pci.bus_id": pci, "name": name, "uuid": uuid,
               "serial": fields["Serial Number"], "driver_version": driver,
               "mig.mode.current": fields["MIG Mode/Current"]}  # fmt: skip
        rows.append(", ".join(row[f] or "[N/A]" for f in gpu_parse.QUERY_GPU_FIELDS))
        listing.append(f"GPU {index}: {name} (UUID: {uuid})")
    return "\n".join(rows) + "\n", "\n".join(listing) + "\n"


@pytest.mark.parametrize("machine", sorted(SAME_MACHINE))
def test_the_query_alone_reads_what_the_three_calls_read(machine: str, shared_dir: Path) -> None:
    """On each machine that recorded all three, the GPU query's command asks nvidia-smi once,
    and the fact's value is the one parsed from the query, -L and --version all run."""
    query, listing, version = SAME_MACHINE[machine]
    rows = our_rows(query)
    calls = stand_in(shared_dir, answers_of(rows, read_fixture(listing), read_fixture(version)))
    output = run_as_reader(NvidiaGpus().command(), shared_dir)
    assert calls.read_text().splitlines() == [QUERY_ARGS]
    ran = {"list": f"ran\n{read_fixture(listing)}", "query": f"ran\n{rows}",
           "version": f"ran\n{read_fixture(version)}"}  # fmt: skip
    every_call = NvidiaGpus.parse(ran)
    assert NvidiaGpus().process(output) == every_call
    assert every_call["present"] and every_call["listing"]


def test_a_gpu_in_mig_mode_is_listed_by_minus_l(shared_dir: Path) -> None:
    """MIG mode Enabled in the query's rows: -L runs (only it lists the slices); the driver is
    still the query's, the same as --version's on that machine."""
    query, listing, version = MIG_MACHINE
    rows = our_rows(query)
    calls = stand_in(shared_dir, answers_of(rows, read_fixture(listing), read_fixture(version)))
    gpu = NvidiaGpus().process(run_as_reader(NvidiaGpus().command(), shared_dir))
    assert calls.read_text().splitlines() == [QUERY_ARGS, "-L"]
    assert [len(g["mig"]) for g in gpu["listing"]] == [4]
    assert gpu["driver"] == gpu_parse.parse_smi_version(read_fixture(version)).driver
    with pytest.raises(ValueError, match="MIG"):
        gpu_parse.parse_query_listing(rows)


def test_a_failed_query_leaves_minus_l_and_version_their_own_words(shared_dir: Path) -> None:
    """NVML could not start (a recorded driver/library mismatch, printed by every call): -L and
    --version run as before, so the fact says what -L said."""
    failed = read_fixture("driver_mismatch_nvml-570.124.txt")
    calls = stand_in(shared_dir, answers_of(failed, failed, failed, failed))
    gpu = NvidiaGpus().process(run_as_reader(NvidiaGpus().command(), shared_dir))
    assert calls.read_text().splitlines() == [QUERY_ARGS, "-L", "--version"]
    said = NvidiaGpus.parse({part: f"ran\n{failed}" for part in ("list", "query", "version")})
    assert gpu == said and gpu["present"] is False


# nvidia-smi calls of the fast subset's one read (npd and prolog read the same GPU facts):
# the GPU query, then `-q -x`, `nvlink -s` and the compute apps query.
@pytest.mark.parametrize("mode_name", ["npd", "prolog"])
def test_the_fast_subset_starts_nvidia_smi_fewer_times(mode_name: str, shared_dir: Path) -> None:
    """The calls each node's read makes: four on an 8-GPU node without MIG (the query answers
    for -L and --version); five with MIG; six where NVML cannot start. Without nvidia-smi the
    read asks none and says so."""
    _, gpu = fast_subset_calls(mode_name, None)
    assert gpu["smi"] is (shutil.which("nvidia-smi") is not None)

    rows, listing = h100x8_rows()
    version = read_fixture("nvidia-smi--version_h100_580.159.04_vm.txt")
    stand_in(shared_dir, answers_of(rows, listing, version))
    calls, gpu = fast_subset_calls(mode_name, shared_dir)
    assert len(calls) == 4 and calls.count(QUERY_ARGS) == 1, calls
    assert "-L" not in calls and "--version" not in calls
    assert [g["uuid"] for g in gpu["listing"]] == [g["uuid"] for g in gpu["gpus"]]
    assert len(gpu["listing"]) == 8 and gpu["driver"] == "535.161.08"

    query, mig_listing, mig_version = MIG_MACHINE
    (shared_dir / "calls").unlink()
    stand_in(shared_dir, answers_of(our_rows(query), read_fixture(mig_listing),
                                    read_fixture(mig_version)))  # fmt: skip
    calls, gpu = fast_subset_calls(mode_name, shared_dir)
    assert len(calls) == 5 and calls.count("-L") == 1 and "--version" not in calls, calls
    assert gpu["listing"][0]["mig"]

    failed = read_fixture("driver_mismatch_nvml-570.124.txt")
    (shared_dir / "calls").unlink()
    stand_in(shared_dir, answers_of(failed, failed, failed, failed))
    calls, gpu = fast_subset_calls(mode_name, shared_dir)
    assert len(calls) == 6 and gpu["present"] is False, calls
