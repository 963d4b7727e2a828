"""The checks' facts run for real on this machine (full PATH and a bare one), and the GPU facts
on recorded outputs, served by a stand-in nvidia-smi that only replays fixture files."""

from __future__ import annotations

import http.server
import os
import re
import shlex
import shutil
import socketserver
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from gpurig.facts import gpurig_node
from gpurig.facts.gpurig_container import TORCH_LINE, TORCH_PY, ContainerTorch
from gpurig.facts.gpurig_node import (
    CgroupLeaks,
    CgroupMemory,
    DiskSpace,
    EngineSocket,
    EngineVersions,
    HostMemory,
    Login,
    LoginShell,
)
from gpurig.facts.gpurig_nvidia import (
    GpuDevices,
    GpuHealth,
    GpuProcesses,
    KernelLog,
    NvidiaGpus,
    NvidiaModule,
    NvlinkStatus,
    RebootRequired,
)
from gpurig.facts.gpurig_packages import OsRelease
from gpurig.facts.round_trip import HostState, Snapshot, Unreadable
from gpurig.read.gpu_parse import QUERY_GPU_COMMAND
from tests.unit.fact_values import framed, run_here
from tests.unit.gpu_fixtures import read_fixture, recorded_command

NODE_FACTS = (OsRelease, Login, CgroupMemory, CgroupLeaks, HostMemory, LoginShell, EngineVersions)
GPU_FACTS = (NvidiaGpus, GpuHealth, GpuProcesses, NvlinkStatus, GpuDevices, RebootRequired,
             NvidiaModule, KernelLog)  # fmt: skip


def bare_path(tmp_path: Path, tools: tuple[str, ...] = ("sh", "cat", "sed")) -> str:
    """A PATH holding only the named tools, as on a host stripped to the bone."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
    return str(bin_dir)


def test_node_facts_read_this_machine() -> None:
    assert run_here(OsRelease)["kernel"] == os.uname().release
    login = run_here(Login)
    assert login["uid"] == os.getuid()
    assert login["sudo"] is None or os.getuid() != 0  # root is never asked about sudo
    disks = run_here(DiskSpace, paths=["/", "/tmp"])
    assert [d["path"] for d in disks] == ["/", "/tmp"]
    assert disks[0]["free_bytes"] > 0 and disks[0]["inodes_total"] > 0
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    total = next(int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:"))
    assert run_here(HostMemory)["total_bytes"] == total * 1024  # what shm.size compares with
    assert run_here(CgroupMemory)["oom_kill"] is not None


def test_facts_report_absence_with_only_sh_cat_and_sed(tmp_path: Path) -> None:
    """No df, no engine, no nvidia-smi, no curl, no timeout: absence, never a failure."""
    path = bare_path(tmp_path)
    [disk] = run_here(DiskSpace, env_path=path, paths=["/tmp"])
    assert disk == {"path": "/tmp", "exists": True, "mount": None, "free_bytes": None,
                    "inodes_total": None, "inodes_free": None}  # fmt: skip
    assert run_here(EngineVersions, env_path=path) == {"docker": None, "podman": None}
    for fact in GPU_FACTS:
        assert run_here(fact, env_path=path) == fact().default(), fact.__name__
    assert run_here(NvidiaGpus, env_path=path)["error"] == "nvidia-smi is not installed"
    for fact in NODE_FACTS:
        run_here(fact, env_path=path)  # answers, whatever it could read


def test_a_path_with_quotes_backslashes_and_control_characters_is_data() -> None:
    weird = '/no/such "dir"\\' + "".join(chr(c) for c in range(1, 32) if c != 10)
    [disk] = run_here(DiskSpace, paths=[weird])
    assert disk["path"] == weird and disk["exists"] is False and disk["free_bytes"] is None


class _Ping(http.server.BaseHTTPRequestHandler):
    answer = b"OK"

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(self.answer if self.path == "/_ping" else b"?")

    def address_string(self) -> str:  # a unix socket has no client address
        return "local"

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize(("answer", "answers"), [(b"OK", True), (b"<html>no</html>", False)])
def test_engine_socket_asks_a_real_socket_for_ping(
    tmp_path: Path, answer: bytes, answers: bool
) -> None:
    """A real HTTP server on a unix socket, asked by the fact's curl."""
    sock = tmp_path / "engine.sock"
    handler = type("Ping", (_Ping,), {"answer": answer})
    with socketserver.UnixStreamServer(str(sock), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            found = run_here(EngineSocket, path=str(sock))
        finally:
            server.shutdown()
    assert found == {"exists": True, "answers": answers}
    assert run_here(EngineSocket, path=str(tmp_path / "none.sock")) == {
        "exists": False, "answers": None
    }  # fmt: skip


# The H100 VM's recordings, each served only for the command it was recorded from.
REPLAY = (
    "nvidia-smi_query-gpu_csv-noheader_h100_580.159.04_health-fields.txt",
    "nvidia-smi--version_h100_580.159.04_vm.txt",
    "nvidia-smi-q-x_h100_580.159.04_vm.xml",
    "nvidia-smi-L_h100_580.159.04_vm.txt",
    "nvidia-smi_nvlink-s_h100-single_580.159.04_vm.txt",
)


def test_gpu_facts_parse_recorded_outputs_through_their_commands(tmp_path: Path) -> None:
    """A stand-in nvidia-smi replays recorded files, each only for the arguments it was recorded
    with (anything else fails); each fact's own command runs it, and its process() parses what
    came back. GpuProcesses is not run: its query was never recorded on this machine."""
    bin_dir = Path(bare_path(tmp_path, ("sh", "cat", "sed", "timeout")))
    cases = ""
    for name in REPLAY:
        (tmp_path / name).write_text(read_fixture(name))
        args = recorded_command(name).removeprefix("nvidia-smi ")
        cases += f"  {shlex.quote(args)}) cat {tmp_path / name} ;;\n"
    (bin_dir / "nvidia-smi").write_text(
        f'#!/bin/sh\ncase "$*" in\n{cases}  *) echo "not recorded: $*"; exit 9 ;;\nesac\n'
    )
    (bin_dir / "nvidia-smi").chmod(0o755)
    path = str(bin_dir)
    gpu = run_here(NvidiaGpus, env_path=path)
    assert (gpu["present"], gpu["driver"], gpu["error"]) == (True, "580.159.04", None)
    (row,) = gpu["gpus"]
    assert (row["name"], row["compute_cap"], row["mig.mode.current"]) == (
        "NVIDIA H100 80GB HBM3", "9.0", "Disabled"
    )  # fmt: skip
    (listed,) = gpu["listing"]
    assert (listed["name"], listed["uuid"], listed["mig"]) == (row["name"], row["uuid"], [])
    health = run_here(GpuHealth, env_path=path)
    assert health["health"][0]["pci"] == row["pci.bus_id"] == "00000000:00:06.0"
    assert health["throttle"] == {"00000000:00:06.0": ["gpu_idle"]}
    assert health["ecc_uncorrectable"] == {"00000000:00:06.0": 0}
    assert run_here(NvlinkStatus, env_path=path) == []


def test_the_gpu_query_is_gpu_parse_command() -> None:
    assert NvidiaGpus().command().count(QUERY_GPU_COMMAND.removeprefix("nvidia-smi ")) == 1


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("proc_driver_nvidia_version_384.98_proprietary.txt",
         {"version": "384.98", "open": False, "l4t": False}),
        ("proc_driver_nvidia_version_525.60.11_open_archlinux-no-date.txt",
         {"version": "525.60.11", "open": True, "l4t": False}),
    ],
)  # fmt: skip
def test_gpu_query_reads_the_kernel_module(name: str, expected: dict[str, Any]) -> None:
    assert NvidiaGpus.parse({"module": read_fixture(name)})["kernel_module"] == expected


def test_kernel_log_reads_xid_lines() -> None:
    text = read_fixture("kernel_xid_119_gsp_rpc_timeout.txt")
    log = KernelLog.parse({"gpu_lines": text})
    assert len(log["xids"]) == text.count("NVRM: Xid") > 0
    assert {(x["xid"], x["pci"]) for x in log["xids"]} == {(119, "0000:9b:00")}


def test_a_refused_query_is_kept_as_an_error() -> None:
    text = read_fixture("nvidia-smi_query-gpu_error_compute_cap-not-valid.txt")
    gpu = NvidiaGpus.parse({"list": "ran\n", "query": f"ran\n{text}"})
    assert gpu["gpus"] is None
    assert "not a valid field" in gpu["gpus_error"]


def test_an_nvml_mismatch_is_read_and_no_gpu_is_present() -> None:
    text = read_fixture("driver_mismatch_nvml-570.124.txt")
    gpu = NvidiaGpus.parse({"list": f"ran\n{text}", "query": f"ran\n{text}"})
    assert gpu["nvml_mismatch"] == "570.124"
    assert gpu["listing"] is None and "Failed to initialize NVML" in gpu["listing_error"]
    assert gpu["present"] is False and "Driver/library version mismatch" in gpu["error"]
    # The other nvidia-smi readings say nothing rather than fail to parse the same failure.
    assert GpuHealth.parse({"xml": f"ran\n{text}"}) == GpuHealth().default()
    assert GpuProcesses.parse({"apps": f"ran\n{text}"}) is None


def test_odd_gpu_output_is_unreadable_host_output() -> None:
    """Output of another shape is the host's (state.unreadable for the checks reading it),
    never a crash in the judges that gpurig would report as its own bug."""
    fact = HostState()
    reads = [(GpuHealth, {}), (GpuProcesses, {}), (NvidiaGpus, {})]
    fact.command(reads=reads)
    odd = framed("part", {"xml": ["ran", "<nvidia_smi_log><gpu"], "apps": ["ran", "GPU-1, 12"]})
    values = fact.process(framed("section", {str(index): odd for index in range(len(reads))}))
    snapshot = Snapshot(values)
    for cls in (GpuHealth, GpuProcesses):
        with pytest.raises(Unreadable, match=cls.__name__):
            snapshot(cls)
    assert snapshot(NvidiaGpus)["present"] is False  # its parts were not printed: absence


def test_container_torch_reads_only_the_containers_python_answer() -> None:
    """Docker prints why an exec failed on stdout (an image without python3, as the sandbox's
    train image is): that is no torch, not odd output. The answer itself is strict JSON."""
    here = subprocess.run([sys.executable, "-c", TORCH_PY], capture_output=True, text=True)
    assert here.stdout == f"{TORCH_LINE}null\n"  # this environment has no torch
    assert ContainerTorch.parse({"torch": here.stdout}) is None
    failed = ('OCI runtime exec failed: exec failed: unable to start container process: exec: '
              '"python3": executable file not found in $PATH: unknown')  # fmt: skip
    assert ContainerTorch.parse({"torch": failed}) is None
    answer = '{"version": "2.7.0", "cuda": "12.8", "arch_list": ["sm_90"]}'
    assert ContainerTorch.parse({"torch": f"{failed}\n{TORCH_LINE}{answer}"})["cuda"] == "12.8"
    with pytest.raises(ValueError):
        ContainerTorch.parse({"torch": f"{TORCH_LINE}{{not json"})


def test_disk_space_reads_all_paths_with_one_df_of_each_kind_and_each_path_where_that_fails(
    tmp_path: Path,
) -> None:
    paths = ["/", "/tmp", "/no/such/dir"]
    command = DiskSpace().command(paths=paths)
    traced = tmp_path / "trace"
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve", "-o", str(traced), "sh", "-c",
                    command], capture_output=True, check=True)  # fmt: skip
    dfs = re.findall(r'execve\("[^"]*/df"', traced.read_text())
    assert len(dfs) == 2  # -k and -i, each for both paths that exist
    disks = run_here(DiskSpace, paths=paths)
    assert [d["exists"] for d in disks] == [True, True, False]
    assert disks[0]["free_bytes"] > 0 and disks[1]["inodes_total"] > 0
    assert disks[2]["free_bytes"] is None
    # Where the one df fails (a stale handle on one path), each path is read alone: the parts
    # the command prints then, as df printed them on this machine.
    k = subprocess.run(["df", "-P", "-k", "--", "/"], capture_output=True, text=True).stdout
    i = subprocess.run(["df", "-P", "-i", "--", "/"], capture_output=True, text=True).stdout
    parts = {"e0": "exists", "e1": "exists", "k": "", "k0": k, "k1": "", "i": "", "i0": i}
    root, stale = DiskSpace.entries(["/", "/stale"], parts)
    assert root["mount"] == "/" and root["free_bytes"] > 0 and root["inodes_free"] > 0
    assert stale["exists"] and stale["free_bytes"] is None and stale["inodes_free"] is None


@pytest.mark.parametrize(
    ("profile", "expected", "line"),
    [
        ("ulimit -S -c 0\n", "0", None),
        # The user's own line after gpurig's block, and a login file that prints first.
        ("ulimit -S -c 0\necho welcome back\nulimit -S -c unlimited\n", "unlimited", 3),
        ("ulimit -S -c 0\nulimit -S -c 2048", "2048", 2),  # no final newline
    ],
)
def test_login_shell_reads_the_limit_the_users_own_login_file_leaves(
    tmp_path: Path, profile: str, expected: str, line: int | None
) -> None:
    """The real login shell with the login's own ~/.profile: its last word is the answer, and
    a limit that is not 0 comes with the line that set it."""
    (tmp_path / ".profile").write_text(profile)
    fact = LoginShell()
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    done = subprocess.run(["sh", "-c", fact.command()], env=env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    found = fact.process(done.stdout.splitlines())
    assert found["ulimit_c"] == expected
    assert (found["where"] or {}).get("line") == line
    assert line is None or found["where"]["file"] == "~/.profile"


# gpurig's block in the user's ~/.profile (scope: user), as the converge writes it.
BLOCK = (
    "# >>> gpurig core_dumps (written by gpurig: edits here are replaced) >>>\n"
    "ulimit -S -c 0 2>/dev/null || true\n"
    "# <<< gpurig core_dumps <<<\n"
)
# The field note: the user's own line after gpurig's block, then a subshell and a command
# substitution that set other limits (neither changes the login's own), then a file it sources.
RAISED = (
    f"export EDITOR=vi\n{BLOCK}alias ll='ls -l'\nulimit -c unlimited\n"
    "( ulimit -c 5 )\nx=$(ulimit -c 7; echo)\n"
)
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _login_as(home: Path, account: list[str]) -> dict[str, Any]:
    fact = LoginShell()
    env = {"HOME": str(home), "PATH": os.environ["PATH"]}
    done = subprocess.run([*account, "sh", "-c", fact.command()], env=env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    return fact.process(done.stdout.splitlines())


@pytest.mark.parametrize("account", [[], AS_NOBODY], ids=["this-login", "another-account"])
@pytest.mark.parametrize(
    ("files", "where"),
    [
        ({".profile": RAISED}, {"file": "~/.profile", "line": 6,
                                "command": "ulimit -c unlimited"}),
        # A login file that ~/.profile sources, as Debian's sources ~/.bashrc.
        ({".profile": f"{BLOCK}. \"$HOME/.bashrc\"\n",
          ".bashrc": "# ~/.bashrc\n\nulimit -Sc unlimited\n"},
         {"file": "~/.bashrc", "line": 3, "command": "ulimit -Sc unlimited"}),
        # bash reads ~/.bash_profile first, and then not ~/.profile.
        ({".profile": "ulimit -c 1\n", ".bash_profile": f"{BLOCK}builtin ulimit -c 4096\n"},
         {"file": "~/.bash_profile", "line": 4, "command": "builtin ulimit -c 4096"}),
    ],
    ids=["profile", "sourced", "bash_profile"],
)  # fmt: skip
def test_login_shell_names_the_file_and_line_that_raised_the_limit(
    private_dir: Path, files: dict[str, str], where: dict[str, Any], account: list[str]
) -> None:
    """The real login shell, traced: the last `ulimit` that left the limit where the login
    ends, by file (under HOME: `~/...`) and line. As root bash takes no PS4 from the
    environment: the login's files are read in bash's order by a shell that sets it; another
    account's login shell is traced itself."""
    if account and os.geteuid() != 0:
        pytest.skip("another account's login needs root to start it")
    home = private_dir / "home"
    home.mkdir(mode=0o755)
    for name, text in files.items():
        (home / name).write_text(text)
    found = _login_as(home, account)
    assert found == {"ulimit_c": where["command"].split()[-1], "where": where}


def test_the_login_shells_trace_leaves_the_host_bounded_and_parsed_strictly(tmp_path: Path):
    """A profile that sets the limit a thousand times, with a line too long to keep, then a
    command substitution in its words: at most LOGIN_TRACED lines of at most 300 characters
    each come back, and what names the location is what bash ran, never a command for us."""
    loop = "i=0\nwhile [ $i -lt 1000 ]; do ulimit -S -c $i; i=$((i+1)); done\n"
    long = f"ulimit -S -c 1 {'-n 64 ' * 60}\n"
    (tmp_path / ".profile").write_text(f"{loop}{long}ulimit -S -c $(echo 77)\n")
    fact = LoginShell()
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    done = subprocess.run(["sh", "-c", fact.command()], env=env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    traced = [line for line in done.stdout.splitlines() if line.startswith("at ")]
    assert 0 < len(traced) <= gpurig_node.LOGIN_TRACED and all(len(line) <= 303 for line in traced)
    assert fact.process(done.stdout.splitlines()) == {
        "ulimit_c": "77",
        "where": {"file": "~/.profile", "line": 4, "command": "ulimit -S -c 77"},
    }


@pytest.mark.parametrize(
    "lines",
    [
        ["0", "at +/root/.profile:3: ulimit -c 0", "oops"],  # a line that is none of ours
        ["0", *(["at +/x:1: ulimit -c 1"] * 9)],  # more than the shell keeps (LOGIN_TRACED)
        ["0", "home /h", "home /h"],
    ],
)
def test_login_shell_output_is_refused_unless_it_is_what_the_fact_prints(lines: list[str]):
    with pytest.raises(ValueError, match="unexpected line"):
        LoginShell.parse({"ulimit_c": "\n".join(lines)})


@pytest.mark.parametrize(
    "traced",
    [
        "at +/h/.profile\x1b[2J:3: ulimit -c unlimited",  # a control character in its name
        "at +/h/.pro\u202efile:3: ulimit -c unlimited",  # a character that reorders text
        "at +/h/.profile:3: ulimit -c $(reboot)",  # words bash would have expanded
        "at +/h/.profile:3: eval ulimit -c unlimited",
        "at +/h/.profile:3: ulimit -c",  # prints the limit, sets none
        "at +/h/.profile:x: ulimit -c unlimited",
        "at + ulimit -c unlimited",  # root's bash, had it taken PS4 from the environment
        "at +/h/.profile:3: ulimit -S -c 0",  # gpurig's own line did not hold: not its doing
    ],
)
def test_a_traced_line_names_a_location_only_when_it_is_one(traced: str) -> None:
    assert LoginShell.parse({"ulimit_c": f"unlimited\n{traced}\nhome /h"}) == {
        "ulimit_c": "unlimited", "where": None
    }  # fmt: skip


@pytest.mark.parametrize(
    ("home", "file"),
    [("home /h", "~/.profile"), ("home /h/", "~/.profile"), ("home /", "/h/.profile"),
     ("home /h\x1b[2J", "/h/.profile"), ("home /hh", "/h/.profile")],
)  # fmt: skip
def test_a_file_under_the_accounts_home_is_said_from_it(home: str, file: str) -> None:
    """`~/` only for a file inside HOME, and only from a HOME the fact can print plainly."""
    traced = "at +/h/.profile:3: ulimit -c unlimited"
    found = LoginShell.parse({"ulimit_c": f"unlimited\n{traced}\n{home}"})
    assert found["where"] == {"file": file, "line": 3, "command": "ulimit -c unlimited"}


@pytest.mark.parametrize(
    ("words", "value"),
    [("-c 0", "0"), ("-S -c unlimited", "unlimited"), ("-Hc 0", "0"), ("-n 1024 -c 9", "9"),
     ("-c hard", "hard"), ("-c", None), ("-a", None), ("-cn 0", None), ("-c -n", None),
     ("0", None)],
)  # fmt: skip
def test_core_value_reads_the_limit_a_ulimit_command_sets(words: str, value: str | None):
    assert gpurig_node.core_value(words.split()) == value


def _login_runs(
    home: Path, kept: Path | None, where: dict[str, Any] | None = None
) -> tuple[str, int]:
    """LoginShell's answer, and how many times the login shell ran so far (its ~/.profile
    counts them); the location it names must be `where`."""
    fact = LoginShell()
    env = {"HOME": str(home), "PATH": os.environ["PATH"]}
    if kept is not None:
        env["GPURIG_RUNTIME_DIR"] = str(kept)
    done = subprocess.run(["sh", "-c", fact.command()], env=env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    runs = home / "runs"
    found = fact.process(done.stdout.splitlines())
    assert found["where"] == where
    return found["ulimit_c"], (len(runs.read_text().splitlines()) if runs.exists() else 0)


def test_the_login_shells_answer_is_kept_until_a_login_file_changes(tmp_path: Path) -> None:
    """Root's profile runs at every job start and health interval: kept under the identity of
    every login file, it runs again only when one changes (here: the user's own line added
    after gpurig's, which must be seen at once) or the answer is old. A limit that is not 0
    runs it once more, traced, for where it was set; that is kept with the answer."""
    home, kept = tmp_path / "home", tmp_path / "run"
    home.mkdir()
    kept.mkdir(mode=0o700)
    (home / ".profile").write_text(f"echo x >> {home}/runs\nulimit -S -c 0\n")
    assert _login_runs(home, kept) == ("0", 1)
    assert _login_runs(home, kept) == ("0", 1)  # kept: no login shell
    with (home / ".profile").open("a") as profile:
        profile.write("ulimit -S -c unlimited\n")
    where = {"file": "~/.profile", "line": 3, "command": "ulimit -S -c unlimited"}
    assert _login_runs(home, kept, where) == ("unlimited", 3)  # the answer, then its trace
    assert _login_runs(home, kept, where) == ("unlimited", 3)  # kept, with where it was set
    assert [p.name for p in kept.iterdir()] == ["login"]  # one answer, the last
    # Another login's answer (another HOME, limit 0) takes nothing of the kept location.
    other = tmp_path / "other"
    other.mkdir()
    (other / ".profile").write_text("ulimit -S -c 0\n")
    assert _login_runs(other, kept) == ("0", 0)


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory of another account's")
def test_nothing_is_kept_where_another_account_could_change_it(tmp_path: Path) -> None:
    home, theirs = tmp_path / "home", tmp_path / "theirs"
    home.mkdir()
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    (home / ".profile").write_text(f"echo x >> {home}/runs\nulimit -S -c 0\n")
    assert _login_runs(home, theirs) == ("0", 1)
    assert _login_runs(home, theirs) == ("0", 2)
    assert list(theirs.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the link is another account's, the mkdir root's")
def test_root_makes_no_runtime_directory_through_another_accounts_link(private_dir: Path) -> None:
    """GPURIG_RUNTIME_DIR was made (mkdir -p) before it was walked: through alice's link root
    made a directory in a root-only place (a `/etc/nologin` stops every login). It is made only
    in a parent root alone can change, by the walked name."""
    home, theirs, target = private_dir / "home", private_dir / "theirs", private_dir / "etc"
    home.mkdir()
    theirs.mkdir()
    target.mkdir(mode=0o700)  # a root-only place
    os.chown(theirs, 65534, 65534)
    (theirs / "link").symlink_to(target)
    os.lchown(theirs / "link", 65534, 65534)
    (home / ".profile").write_text("ulimit -S -c 0\n")
    assert _login_runs(home, theirs / "link" / "nologin") == ("0", 0)
    assert list(target.iterdir()) == []
    made = private_dir / "run"  # a parent of root's alone: made, and the answer kept there
    assert _login_runs(home, made / "gpurig") == ("0", 0)
    assert not made.exists()  # its parent is missing: nothing made above it either
    root_only = private_dir / "gpurig"
    assert _login_runs(home, root_only) == ("0", 0)
    assert [p.name for p in root_only.iterdir()] == ["login"]
