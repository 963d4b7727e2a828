"""At fleet scale: `gpurig validate` on generated inventories of hundreds to thousands of hosts,
and `gpurig drift` on that many sandbox fleet hosts beside a bare parallel `ssh host true`.

    .venv/bin/python benchmarks/fleet_scale.py validate [--hosts 100,500,1000,5000,10000]
        [--repeat 3]
    sudo .venv/bin/python benchmarks/fleet_scale.py drift [--hosts 100,500,1000] [--repeat 1]
        [--converge]

`validate` needs nothing but this checkout: each inventory is written here the way the drift
benchmark writes a sandbox fleet's (an address, the SSH port and a pinned host key per host),
with each host's four-key spec written out in its own entry, the most a plain file carries.
`drift` needs root: it brings up its own sandbox (named $GPURIG_BENCH_SANDBOX or `scale`, up to
1,000 fleet hosts), times drift with that spec on every host (and with --converge a no-op
converge, every host converged once first), and takes the sandbox down at the end. Each
prints one Markdown table: median wall time, the client's CPU, and the largest
process of the whole process tree (benchmarks/drift_bench.py measures each run).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from base64 import b64encode
from collections.abc import Iterator
from pathlib import Path

import yaml

from benchmarks import drift_bench as bench
from gpurig.sandbox import manager
from gpurig.sandbox.state import locate


def host_key(name: str) -> str:
    """A well-formed ed25519 public key of its own for each host name (never used to connect)."""
    kind = b"ssh-ed25519"
    blob = b"".join(len(part).to_bytes(4, "big") + part
                    for part in (kind, hashlib.sha256(name.encode()).digest()))  # fmt: skip
    return f"{kind.decode()} {b64encode(blob).decode()}"


def fleet_inventory(hosts: int) -> str:
    """An inventory of `hosts` fleet hosts as the sandbox and the drift benchmark write one
    (gpurig.sandbox.manager.write_access_files, drift_bench.write_fleet), each host's spec
    written in its own entry."""
    entries = {}
    for i in range(1, hosts + 1):
        name = f"fleet-{i:04d}"
        entries[name] = {
            "address": f"10.{100 + i // 65536}.{i // 256 % 256}.{i % 256}",
            "ssh": {"host_key": host_key(name), "port": 22},
            "groups": ["fleet"],
            "spec": bench.FLEET_SPEC,
        }
    inventory = {
        "version": 1,
        "defaults": {"ssh": {"user": "root", "key": "~/.ssh/gpurig-sandbox"}},
        "groups": {"fleet": {"spec": {"engine": "none", "gpu": "absent"}}},
        "hosts": entries,
    }
    # Dumped without aliases, as a person or a generator writes each host out.
    return yaml.dump(inventory, Dumper=_Plain, sort_keys=False)


class _Plain(yaml.SafeDumper):
    def ignore_aliases(self, data: object) -> bool:
        return True


def time_validate(sizes: list[int], repeat: int, scratch: Path) -> Iterator[str]:
    """`gpurig validate` on a generated inventory of each size: a table row each."""
    yield "| hosts | file MiB | seconds | ms/host | CPU s | largest process MiB |"
    yield "|---:|---:|---:|---:|---:|---:|"
    for size in sizes:
        path = scratch / f"fleet-{size}.yaml"
        path.write_text(fleet_inventory(size))
        argv = [str(bench.BIN / "gpurig"), "validate", str(path)]
        runs = [bench.measure(argv, {}, bench.exit_0) for _ in range(repeat)]
        seconds = statistics.median(r.seconds for r in runs)
        yield (
            f"| {size} | {path.stat().st_size / 1024**2:.1f} | {seconds:.2f} "
            f"| {seconds / size * 1000:.1f} | {statistics.median(r.cpu for r in runs):.2f} "
            f"| {max(r.max_rss_kib for r in runs) / 1024:.0f} |"
        )


def time_drift(
    paths: manager.Paths, sizes: list[int], repeat: int, scratch: Path, converge: bool
) -> Iterator[str]:
    """drift (and with `converge` a no-op converge) and `ssh host true` on the first N sandbox
    fleet hosts, for each N: a row each."""
    inventory = yaml.safe_load(paths.inventory.read_text())["hosts"]
    names = [f"fleet-{i:03d}" for i in range(1, max(sizes) + 1)]
    direct = {name: (inventory[name]["address"], 22) for name in names}
    methods = [bench.DRIFT, *([bench.CONVERGE] if converge else []), bench.SSH, bench.SSH_POOLED]
    args = argparse.Namespace(methods=methods, repeat=repeat, ansible_repeat=0)
    unused = scratch / "unused.yml"  # the Ansible playbook: not among the methods
    if converge:  # the converge timed is a no-op: bring every host to the spec first
        everyone = bench.write_fleet(paths, bench.FLEET_SPEC, direct, names, scratch / "all")
        [(argv, env, ok)] = bench.commands(everyone, unused, scratch, [bench.CONVERGE]).values()
        bench.measure(argv, env, ok)
    yield "| hosts | method | seconds | x ssh | x ssh pooled | CPU ms/host | largest process MiB |"
    yield "|---:|---|---:|---:|---:|---:|---:|"
    for size in sizes:
        fleet = bench.write_fleet(paths, bench.FLEET_SPEC, direct, names[:size],
                                  scratch / str(size))  # fmt: skip
        cells = bench.time_fleet(fleet, unused, scratch, args, {})
        for method, cell in cells.items():
            if cell.skipped:
                yield f"| {size} | {method} | {cell.skipped} | | | | |"
                continue
            ratios = " | ".join(
                f"{cell.seconds / cells[floor].seconds:.2f}" if cells[floor].runs else ""
                for floor in (bench.SSH, bench.SSH_POOLED)
            )
            cpu = statistics.median(r.cpu for r in cell.runs) / size * 1000
            rss = max(r.max_rss_kib for r in cell.runs) / 1024
            yield f"| {size} | {method} | {cell.seconds:.2f} | {ratios} | {cpu:.0f} | {rss:.0f} |"


NEIGHBOURS = Path("/proc/sys/net/ipv4/neigh/default/gc_thresh3")


def neighbour_room(hosts: int) -> str:
    """Why this machine cannot reach `hosts` sandbox hosts at once, or "": every fleet host is
    a neighbour on the sandbox's bridge, and past the kernel's neighbour table (gc_thresh3,
    1024 by default) connections fail with `neighbor table overflow!` in the kernel log."""
    limit = int(NEIGHBOURS.read_text())
    if hosts + 64 <= limit:  # room for the machine's other neighbours
        return ""
    return (
        f"{hosts} hosts need more neighbour entries than {NEIGHBOURS} allows ({limit}): raise it "
        "(and gc_thresh2) with sysctl for the run"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["validate", "drift"])
    parser.add_argument("--hosts", type=bench.numbers, default=None, help="fleet sizes")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument(
        "--converge", action="store_true", help="drift: also a no-op converge (converged first)"
    )
    args = parser.parse_args()
    if args.what == "drift" and neighbour_room(max(args.hosts or [1000])):
        raise SystemExit(neighbour_room(max(args.hosts or [1000])))
    print(
        f"`{' '.join(['benchmarks/fleet_scale.py', *sys.argv[1:]])}`: medians; CPU and largest "
        "process of the client's whole process tree; load average (1 min) "
        f"{os.getloadavg()[0]:.1f} before, on {os.cpu_count()} CPUs.\n",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        if args.what == "validate":
            sizes = args.hosts or [100, 500, 1000, 5000, 10000]
            rows = time_validate(sizes, args.repeat or 3, Path(tmp))
            for row in rows:
                print(row, flush=True)
        else:
            sizes = args.hosts or [100, 500, 1000]
            name, top = locate(os.environ.get("GPURIG_BENCH_SANDBOX", "scale"), None)
            began = time.monotonic()
            manager.up(top, name, max(sizes), 0, log=lambda _: None)
            print(f"sandbox up: {max(sizes)} fleet hosts in {time.monotonic() - began:.0f} s",
                  file=sys.stderr, flush=True)  # fmt: skip
            try:
                for row in time_drift(manager.Paths(top), sizes, args.repeat or 1, Path(tmp),
                                      args.converge):  # fmt: skip
                    print(row, flush=True)
            finally:
                manager.down(top, log=lambda _: None)
    print(f"\nload average (1 min) after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
