"""Time `gpurig drift`, a no-op converge, drift's own reads as one-command pyinfra facts and as
an Ansible playbook (benchmarks/checks.py), and a bare parallel `ssh host true`, on sandbox hosts
at several distances.

    uv sync --frozen --group bench
    sudo .venv/bin/python benchmarks/drift_bench.py [--hosts 1,10,50,100] [--rtt-ms 0,50,150]
        [--repeat 3] [--ansible-repeat 1] [--max-run-s 300]

Needs root: it brings up its own sandbox, named $GPURIG_BENCH_SANDBOX or `bench`, beside any
other, and takes it down at the end. RTT 0 is the sandbox bridge
itself; any other RTT puts benchmarks/relay.py in front of every host (half the RTT each way),
with the inventory, ssh_config, known_hosts and Ansible inventory pointing at the relay's
loopback ports and still checking each host's own key. Every host carries one full fleet spec
(packages, core dumps, cleanup, checks, a secret, a git checkout), converged once before the
timing, so the converge timed is a no-op and drift checks a clean host.

Prints one Markdown table from one run: per RTT, host count and method, the median wall time,
its ratio to `ssh host true`, the SSH sessions (remote commands and file transfers) per host,
counted by an /etc/ssh/sshrc that logs each session during one untimed pass, and the client's
CPU per host and largest process (wait4 of the method's whole process tree). A method whose
run exceeds --max-run-s is skipped at the larger sizes and RTTs, and the table says so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from benchmarks.checks import checks
from gpurig.remote.pyinfra_inventory import known_hosts_line
from gpurig.sandbox import manager
from gpurig.sandbox.services import url
from gpurig.sandbox.state import load, locate
from gpurig.spec.inventory import load_inventory

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DRIFT, CONVERGE, PER_FACT, ANSIBLE, SSH = (
    "gpurig drift",
    "no-op converge (full spec)",
    "pyinfra, one fact per check",
    "ansible-playbook",
    "ssh host true",
)
METHODS = [DRIFT, CONVERGE, PER_FACT, ANSIBLE, SSH]
# --methods names them by these; `ssh host true` always runs, every ratio is to it.
SHORT = {"drift": DRIFT, "converge": CONVERGE, "per-fact": PER_FACT, "ansible": ANSIBLE}
CONVERGE_DEPLOY = "deploys/gpu_host.py"
ANSIBLE_PLAYBOOK = BIN / "ansible-playbook"
PER_FACT_DEPLOY = "benchmarks/per_fact_deploy.py"
GOALS = {DRIFT: (None, 1.3), CONVERGE: (150, 2.0)}  # method: (only at this RTT, max x ssh)
ANSIBLE_ENV = {
    "ANSIBLE_HOST_KEY_CHECKING": "True",
    "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3",
}
SESSIONS_LOG = "/run/gpurig-bench-sessions"
# sshd runs /etc/ssh/sshrc (when ~/.ssh/rc is absent) for every session before its command.
COUNT_ON = f"umask 077; echo 'echo >> {SESSIONS_LOG}' > /etc/ssh/sshrc; : > {SESSIONS_LOG}"
COUNT_READ = f"n=$(wc -l < {SESSIONS_LOG}); : > {SESSIONS_LOG}; echo $n"
COUNT_OFF = f"rm -f /etc/ssh/sshrc {SESSIONS_LOG}"
PARALLEL_SSH = (
    'cfg=$1; shift; pids=; for h; do ssh -F "$cfg" "$h" true & pids="$pids $!"; done; '
    'rc=0; for p in $pids; do wait "$p" || rc=1; done; exit "$rc"'
)
# The same, so many at a time as drift connects (pyinfra's pool: 20 a CPU): the floor where
# every host at once breaks the client (1,000 key exchanges on 2 CPUs).
SSH_POOLED = "ssh host true, 20 a CPU at a time"
POOLED_SSH = 'cfg=$1; n=$2; shift 2; printf \'%s\\n\' "$@" | xargs -P "$n" -I@ ssh -F "$cfg" @ true'
Endpoints = dict[str, tuple[str, int]]  # host name -> (address, port) the clients dial


@dataclass(frozen=True)
class Run:
    """One timed run of a method: wall seconds, CPU seconds and the largest process (KiB) of
    its whole process tree (daemons it detaches, like ssh's ControlPersist masters, excepted)."""

    seconds: float
    cpu: float
    max_rss_kib: int


def measure(argv: list[str], env: dict[str, str], ok: Callable[[int, str], bool]) -> Run:
    """Run `argv` from the repository root; fail loudly unless ok(exit code, stdout)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        began = time.monotonic()
        proc = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, **env}, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.monotonic() - began
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read()
        if not ok(code, stdout):
            raise SystemExit(
                f"{' '.join(argv)} failed ({code}):\n{unreachable(stdout) or stdout[-1500:]}"
                f"{err.read()[-2000:]}"
            )
    return Run(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)


def exit_0(code: int, _: str) -> bool:
    return code == 0


def drift_reached_every_host(code: int, stdout: str) -> bool:
    """Findings (exit 1) still make a full run; an unreachable host does not."""
    return code in (0, 1) and all(h["reachable"] for h in json.loads(stdout)["hosts"])


def unreachable(stdout: str) -> str:
    """The unreachable hosts of a drift JSON report and why, a line each ("" if none or not
    drift's JSON)."""
    try:
        hosts = json.loads(stdout)["hosts"]
    except (ValueError, KeyError, TypeError):
        return ""
    down = [(h["name"], (h["findings"] or [{}])[0].get("actual", "?")) for h in hosts
            if not h["reachable"]]  # fmt: skip
    return "".join(f"{name}: {why}\n" for name, why in down)


@dataclass(frozen=True)
class Fleet:
    """Access files for `names`: gpurig's inventory, an ssh_config, an Ansible inventory."""

    names: list[str]
    inventory: Path
    ssh_config: Path
    ansible_hosts: Path


def write_fleet(
    paths: manager.Paths, spec: dict, endpoints: Endpoints, names: list[str], out: Path
) -> Fleet:
    """The sandbox inventory cut to `names`, each host dialled at its endpoint and checked
    against its own host key, every host declaring `spec`; and the same for ssh and Ansible."""
    out.mkdir(parents=True, exist_ok=True)
    inventory = yaml.safe_load(paths.inventory.read_text())
    inventory["defaults"]["spec"] = spec
    hosts = {}
    for name in names:
        entry = inventory["hosts"][name]
        address, port = endpoints[name]
        hosts[name] = {**entry, "address": address, "ssh": {**entry["ssh"], "port": port}}
    inventory["hosts"] = hosts
    (out / "inventory.yaml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    known = out / "known_hosts"
    keys = {name: hosts[name]["ssh"]["host_key"] for name in names}
    known.write_text("".join(f"{known_hosts_line(*endpoints[n], keys[n])}\n" for n in names))
    options = [
        f"IdentityFile {paths.client_key}",
        "IdentitiesOnly yes",
        f"UserKnownHostsFile {known}",
        "StrictHostKeyChecking yes",
        "BatchMode yes",
    ]
    (out / "ssh_config").write_text(
        "".join(
            f"Host {n}\n  HostName {endpoints[n][0]}\n  Port {endpoints[n][1]}\n  User root\n"
            + "".join(f"  {option}\n" for option in options)
            for n in names
        )
    )
    ssh_args = f"-o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes"
    (out / "hosts.ini").write_text(
        "[fleet]\n"
        + "".join(
            f"{n} ansible_host={endpoints[n][0]} ansible_port={endpoints[n][1]} "
            f"ansible_user=root ansible_ssh_private_key_file={paths.client_key} "
            f"ansible_ssh_common_args='{ssh_args}'\n"
            for n in names
        )
    )
    return Fleet(names, out / "inventory.yaml", out / "ssh_config", out / "hosts.ini")


def fleet_checks(fleet: Fleet) -> list[str]:
    """The baselines' commands: drift's reads for the spec every host of `fleet` declares."""
    specs = [host.spec for host in load_inventory([fleet.inventory]).hosts]
    assert all(spec == specs[0] for spec in specs), "the bench's hosts declare one spec"
    return checks(specs[0])


def playbook(out: Path, commands: list[str]) -> Path:
    play = [
        {
            "hosts": "fleet",
            "gather_facts": False,
            "tasks": [{"shell": command, "changed_when": False} for command in commands],
        }
    ]
    out.write_text(yaml.safe_dump(play))
    return out


Command = tuple[list[str], dict[str, str], Callable[[int, str], bool]]


def commands(fleet: Fleet, book: Path, scratch: Path, methods: list[str]) -> dict[str, Command]:
    """argv, environment and success test of each of `methods`, for one run on `fleet`."""
    inventory = {"GPURIG_INVENTORY": str(fleet.inventory)}
    pyinfra = [str(BIN / "pyinfra"), "-y", "inventory.py"]
    every = {
        DRIFT: lambda: (
            [str(BIN / "gpurig"), "drift", str(fleet.inventory), "--format", "json"],
            {},
            drift_reached_every_host,
        ),
        CONVERGE: lambda: ([*pyinfra, CONVERGE_DEPLOY], inventory, exit_0),
        PER_FACT: lambda: ([*pyinfra, PER_FACT_DEPLOY], inventory, exit_0),
        ANSIBLE: lambda: (
            [
                str(ANSIBLE_PLAYBOOK),
                "-i",
                str(fleet.ansible_hosts),
                "-f",
                str(len(fleet.names)),
                str(book),
            ],
            # A fresh ControlPath directory per run: no run reuses an earlier run's connections.
            {**ANSIBLE_ENV, "ANSIBLE_SSH_CONTROL_PATH_DIR": tempfile.mkdtemp(dir=scratch)},
            exit_0,
        ),
        SSH: lambda: (
            ["sh", "-c", PARALLEL_SSH, "ssh-true", str(fleet.ssh_config), *fleet.names],
            {},
            exit_0,
        ),
        SSH_POOLED: lambda: (
            [
                "sh",
                "-c",
                POOLED_SSH,
                "ssh-true",
                str(fleet.ssh_config),
                str(20 * (os.cpu_count() or 1)),
                *fleet.names,
            ],
            {},
            exit_0,
        ),
    }
    return {method: every[method]() for method in methods}


def ssh_each(fleet: Fleet, command: str) -> list[str]:
    """Untimed set-up: `command` on every host of `fleet`, in parallel; each one's output."""

    def one(name: str) -> str:
        argv = ["ssh", "-F", str(fleet.ssh_config), name, command]
        return subprocess.run(argv, check=True, capture_output=True, text=True).stdout

    with ThreadPoolExecutor(max_workers=min(len(fleet.names), 32)) as pool:
        return list(pool.map(one, fleet.names))


def count_sessions(fleet: Fleet, book: Path, scratch: Path, methods: list[str]) -> dict[str, float]:
    """SSH sessions per host of each method, from one untimed run each with sshrc logging."""
    ssh_each(fleet, COUNT_ON)
    try:
        counts = {}
        for method, (argv, env, ok) in commands(fleet, book, scratch, methods).items():
            measure(argv, env, ok)
            # sshd logs the reading session itself before it runs: one less.
            total = sum(int(n) - 1 for n in ssh_each(fleet, COUNT_READ))
            counts[method] = total / len(fleet.names)
    finally:
        ssh_each(fleet, COUNT_OFF)
    return counts


@contextmanager
def relayed(direct: Endpoints, rtt_ms: int, lifetime_s: float) -> Iterator[Endpoints]:
    """The hosts' endpoints through benchmarks/relay.py adding `rtt_ms` to each round trip
    (half each way); the hosts themselves at 0."""
    if rtt_ms == 0:
        yield direct
        return
    targets = sorted(set(direct.values()))
    argv = [sys.executable, "-m", "benchmarks.relay", "--delay-ms", str(rtt_ms / 2),
            "--lifetime-s", str(lifetime_s), *(f"{a}:{p}" for a, p in targets)]  # fmt: skip
    relay = subprocess.Popen(
        argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert relay.stdin is not None and relay.stdout is not None
    try:
        line = relay.stdout.readline()
        if not line:
            raise SystemExit(f"benchmarks/relay.py did not start (exit {relay.wait()})")
        ports = json.loads(line)
        yield {name: ("127.0.0.1", ports[f"{a}:{p}"]) for name, (a, p) in direct.items()}
    finally:
        relay.stdin.close()  # the relay stops when its standard input closes
        _, _, usage = os.wait4(relay.pid, 0)
        relay.returncode = 0
        cpu = usage.ru_utime + usage.ru_stime
        print(f"relay at {rtt_ms} ms used {cpu:.1f} s of CPU", file=sys.stderr, flush=True)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def bench_repo(paths: manager.Paths, scratch: Path) -> tuple[str, str]:
    """A one-commit repository served by the sandbox's git daemon: its URL and commit."""
    bare = paths.top / "git" / "repos" / "gpurig-bench.git"
    work = scratch / "repo"
    if not bare.exists():
        git("init", "-q", "--bare", "-b", "main", str(bare))
    git("init", "-q", "-b", "main", str(work))
    (work / "train.sh").write_text("#!/bin/sh\necho training\n")
    git("-C", str(work), "add", "-A")
    git("-C", str(work), "-c", "user.name=gpurig bench", "-c", "user.email=bench@localhost",
        "commit", "-qm", "bench")  # fmt: skip
    git("-C", str(work), "push", "-qf", str(bare), "HEAD:main")
    return f"{url(load(paths.state), 'git')}/gpurig-bench.git", git(
        "-C", str(work), "rev-parse", "HEAD"
    ).strip()


# The concerns a fleet host carries that need nothing on the controller's side.
FLEET_SPEC = {
    "packages": ["openssh-server", "python3", "git"],  # in the rootfs: checked, not installed
    "core_dumps": "disabled",
    "cleanup": {"ray_sessions": True, "core_files": True, "editable_finders": True},
    "checks": {"disk_free_min": "1g", "inodes_free_min_pct": 1},
}


def full_spec(paths: manager.Paths, scratch: Path) -> dict:
    """Every concern a fleet host (no engine, no systemd, no GPU) can carry."""
    url, commit = bench_repo(paths, scratch)
    secret = scratch / "secret"
    secret.write_text("not a real secret\n")
    return {
        **FLEET_SPEC,
        "secrets": [{"src": str(secret), "dest": "/root/.gpurig-bench-secret", "mode": "0600"}],
        "repos": {"/srv/gpurig-bench": {"url": url, "ref": commit, "line_endings": "lf"}},
    }


@dataclass
class Cell:
    """One (RTT, hosts, method) of the table: its runs, or why it has none."""

    runs: list[Run]
    skipped: str = ""

    @property
    def seconds(self) -> float:
        return statistics.median(r.seconds for r in self.runs)


Results = dict[tuple[int, int], dict[str, Cell]]  # (RTT ms, hosts): method: cell


def time_fleet(
    fleet: Fleet, book: Path, scratch: Path, args: argparse.Namespace, skip: dict[str, str]
) -> dict[str, Cell]:
    """Each method's runs on `fleet`, methods interleaved round by round."""
    cells = {method: Cell([], skip.get(method, "")) for method in args.methods}
    for round_ in range(args.repeat):
        # Ansible takes minutes at 100 hosts: it runs once unless asked for more.
        due = [m for m in args.methods if not cells[m].skipped]
        due = [m for m in due if m != ANSIBLE or round_ < args.ansible_repeat]
        for method, (argv, env, ok) in commands(fleet, book, scratch, due).items():
            try:
                cells[method].runs.append(measure(argv, env, ok))
            except SystemExit as failed:  # the table says so; the other cells go on
                print(failed, file=sys.stderr, flush=True)
                cells[method] = Cell([], f"failed in round {round_ + 1}: see stderr")
    return cells


def warn_unless_clean(fleet: Fleet, book: Path, scratch: Path) -> None:
    """Right after the converge, drift should find nothing: say so on stderr if it does (a
    converge that is not a no-op, or a check the sandbox fails), and go on."""
    [(argv, _, _)] = commands(fleet, book, scratch, [DRIFT]).values()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return
    try:
        hosts = json.loads(proc.stdout)["hosts"]
        found = sorted({f["id"] for h in hosts for f in h["findings"]})
    except (ValueError, KeyError):
        found = [proc.stderr[-500:]]
    print(f"warning: drift after the converge exits {proc.returncode}: {found}", file=sys.stderr)


def run_grid(
    paths: manager.Paths, scratch: Path, args: argparse.Namespace
) -> tuple[Results, dict[str, float], int]:
    """Every (RTT, hosts) cell, the SSH sessions per host of each method, and how many checks
    (drift's reads) the baselines run per host."""
    sizes, rtts = args.hosts, args.rtt_ms
    spec = full_spec(paths, scratch)
    inventory = yaml.safe_load(paths.inventory.read_text())["hosts"]
    names = [f"fleet-{i:03d}" for i in range(1, max(sizes) + 1)]
    direct = {name: (inventory[name]["address"], 22) for name in names}
    everyone = write_fleet(paths, spec, direct, names, scratch / "direct")
    baseline = fleet_checks(everyone)
    book = playbook(scratch / "checks.yml", baseline)
    # The converge under test is a no-op: bring every host to the spec first.
    [(argv, env, ok)] = commands(everyone, book, scratch, [CONVERGE]).values()
    measure(argv, env, ok)
    installed = [m for m in args.methods if m != ANSIBLE or ANSIBLE_PLAYBOOK.exists()]
    counted = write_fleet(paths, spec, direct, names[: sizes[0]], scratch / "counted")
    counts = count_sessions(counted, book, scratch, installed)
    results: Results = {}
    # A method too slow at some RTT and size is skipped at every larger RTT and size.
    too_slow = {}
    if ANSIBLE in args.methods and ANSIBLE not in installed:
        too_slow[ANSIBLE] = "not installed (uv sync --group bench)"
    slow_at: dict[str, tuple[int, int]] = {}
    for rtt in rtts:
        with relayed(direct, rtt, lifetime_s=24 * 3600) as endpoints:
            for size in sizes:
                fleet = write_fleet(paths, spec, endpoints, names[:size], scratch / f"{rtt}-{size}")
                skip = {
                    m: reason
                    for m, reason in too_slow.items()
                    if m not in slow_at or (rtt >= slow_at[m][0] and size >= slow_at[m][1])
                }
                cells = results[rtt, size] = time_fleet(fleet, book, scratch, args, skip)
                for method, cell in cells.items():
                    slowest = max((r.seconds for r in cell.runs), default=0.0)
                    if slowest > args.max_run_s and method not in too_slow:
                        too_slow[method] = f"skipped: {size} hosts at {rtt} ms took {slowest:.0f} s"
                        slow_at[method] = (rtt, size)
                print(f"done: {rtt} ms, {size} hosts", file=sys.stderr, flush=True)
    return results, counts, len(baseline)


def table(results: Results, counts: dict[str, float]) -> Iterator[str]:
    """The Markdown table: a row per (RTT, hosts, method)."""
    yield (
        "| RTT ms | hosts | method | seconds | x ssh | SSH sessions/host | CPU ms/host "
        "| largest process MiB |"
    )
    yield "|---:|---:|---|---:|---:|---:|---:|---:|"
    for (rtt, size), cells in results.items():
        ssh = cells[SSH].seconds
        for method, cell in cells.items():
            if cell.skipped:
                yield f"| {rtt} | {size} | {method} | {cell.skipped} | | | | |"
                continue
            cpu = statistics.median(r.cpu for r in cell.runs) / size * 1000
            rss = max(r.max_rss_kib for r in cell.runs) / 1024
            yield (
                f"| {rtt} | {size} | {method} | {cell.seconds:.2f} | {cell.seconds / ssh:.2f} "
                f"| {counts[method]:.1f} | {cpu:.0f} | {rss:.0f} |"
            )


def goals(results: Results) -> Iterator[str]:
    """The benchmark's goals, cell by cell: met or not, with the ratio."""
    for method, (only_rtt, limit) in GOALS.items():
        for (rtt, size), cells in results.items():
            cell = cells.get(method)
            if cell is None or (only_rtt is not None and rtt != only_rtt) or cell.skipped:
                continue
            ratio = cell.seconds / cells[SSH].seconds
            verdict = "met" if ratio <= limit else "NOT met"
            yield f"- {method}, {rtt} ms, {size} hosts: {ratio:.2f}x ssh (goal {limit}x): {verdict}"


def numbers(text: str) -> list[int]:
    return sorted(int(n) for n in text.split(","))


def methods(text: str) -> list[str]:
    """The methods named (see SHORT) and `ssh host true`, in the table's order."""
    named = {SHORT[n] for n in text.split(",")} if text else set(SHORT.values())
    return [m for m in METHODS if m in named or m == SSH]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=numbers, default="1,10,50,100", help="fleet sizes")
    parser.add_argument("--rtt-ms", type=numbers, default="0,50,150", help="added round trips")
    parser.add_argument(
        "--methods",
        type=methods,
        default="",
        help=f"comma-separated, of {','.join(SHORT)} (default all); ssh host true always runs",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ansible-repeat", type=int, default=1)
    parser.add_argument(
        "--max-run-s",
        type=float,
        default=300,
        help="a method whose run takes longer is skipped at every larger size and RTT",
    )
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    name, top = locate(os.environ.get("GPURIG_BENCH_SANDBOX", "bench"), None)
    manager.up(top, name, max(args.hosts), 0, log=lambda _: None)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results, counts, reads = run_grid(manager.Paths(top), Path(tmp), args)
    finally:
        manager.down(top, log=lambda _: None)
    print(
        f"`{' '.join(['benchmarks/drift_bench.py', *sys.argv[1:]])}`: median of {args.repeat} "
        f"runs ({args.ansible_repeat} for Ansible); the pyinfra and Ansible baselines run "
        f"drift's {reads} reads per host as {reads} commands; SSH sessions counted on "
        f"{args.hosts[0]} hosts; CPU and largest process of the client's whole process tree; "
        "load average (1 min) "
        f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs.\n"
    )
    print("\n".join(table(results, counts)))
    print("\nGoals:")
    print("\n".join(goals(results)))


if __name__ == "__main__":
    main()
