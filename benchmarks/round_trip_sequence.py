"""The SSH messages of one drift of one host beside OpenSSH's `ssh host true`, in the order each
client sent and received them, cut into flights: a run of messages the client sends, then what
it reads before it sends again. A flight is at most one round trip on the wire (its answer may
already be on its way, as a server's NEWKEYS travels with its KEX reply), so the count is an
upper bound for each client, taken the same way for both.

    sudo .venv/bin/python -m benchmarks.round_trip_sequence [--sandbox NAME]

Needs root: it brings up (or reuses) a sandbox with one fleet host (named `rts` unless given)
and leaves it up (`gpurig sandbox down --name rts`). gpurig's side is paramiko's packetizer,
each message's type as it is written or read; OpenSSH's is `ssh -vvv`'s "send packet" and
"receive packet" lines. Both connect once, check the host key, and run their command; the TCP
handshake and the banners' exchange come before either's first message (one round trip each
for both clients, not listed).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

# RFC 4250's message numbers, named as the RFCs name them.
NAMES = {
    1: "DISCONNECT", 2: "IGNORE", 4: "DEBUG", 5: "SERVICE_REQUEST", 6: "SERVICE_ACCEPT",
    7: "EXT_INFO", 20: "KEXINIT", 21: "NEWKEYS", 30: "KEX_ECDH_INIT", 31: "KEX_ECDH_REPLY",
    50: "USERAUTH_REQUEST", 51: "USERAUTH_FAILURE", 52: "USERAUTH_SUCCESS", 60: "USERAUTH_PK_OK",
    80: "GLOBAL_REQUEST", 81: "REQUEST_SUCCESS", 82: "REQUEST_FAILURE", 90: "CHANNEL_OPEN",
    91: "CHANNEL_OPEN_CONFIRMATION", 93: "CHANNEL_WINDOW_ADJUST", 94: "CHANNEL_DATA",
    96: "CHANNEL_EOF", 97: "CHANNEL_CLOSE", 98: "CHANNEL_REQUEST", 99: "CHANNEL_SUCCESS",
}  # fmt: skip
Message = tuple[str, int]  # (">" sent or "<" received, its type)


def flights(sequence: list[Message]) -> list[tuple[list[int], list[int]]]:
    """The sequence as round trips: each run of sent messages with the run received after it
    (what the client waited for before it sent again); the last may wait for nothing."""
    found: list[tuple[list[int], list[int]]] = []
    for direction, kind in sequence:
        if direction == ">" and (not found or found[-1][1]):
            found.append(([kind], []))
        elif direction == ">":
            found[-1][0].append(kind)
        elif found:
            found[-1][1].append(kind)
    return found


def waits(sequence: list[Message]) -> int:
    """Round trips the client waited for: its flights that an answer followed before it sent
    again (a closing flight nothing answers costs no wait)."""
    return sum(1 for sent, received in flights(sequence) if received)


def ssh_sequence(config: Path, host: str) -> list[Message]:
    said = subprocess.run(["ssh", "-F", str(config), "-vvv", host, "true"], capture_output=True,
                          text=True, check=True).stderr  # fmt: skip
    found = re.findall(r"debug3: (send|receive) packet: type (\d+)", said)
    return [(">" if way == "send" else "<", int(kind)) for way, kind in found]


def drift_sequence(inventory: Path) -> list[Message]:
    """gpurig drift of the inventory's one host, its messages as paramiko's packetizer sees
    them (in a child process: gevent's patch comes first, as in the console script)."""
    code = f"""
import json, sys
from gpurig.remote.cooperative import patch
patch()
import paramiko.packet as packet
seen = []
send, read = packet.Packetizer.send_message, packet.Packetizer.read_message
def sent(self, data):
    seen.append((">", data.asbytes()[0]))
    return send(self, data)
def got(self):
    kind, message = read(self)
    seen.append(("<", kind))
    return kind, message
packet.Packetizer.send_message, packet.Packetizer.read_message = sent, got
from gpurig.remote.drift import run_drift
from gpurig.remote.pyinfra_inventory import cache_dir
from gpurig.spec.inventory import load_inventory
[report] = run_drift(list(load_inventory([{str(inventory)!r}]).hosts), cache_dir(), retries=0)
assert report.reachable, report
print(json.dumps(seen))
"""
    import json

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [(way, int(kind)) for way, kind in json.loads(done.stdout.splitlines()[-1])]


def show(label: str, sequence: list[Message]) -> list[str]:
    lines = [f"{label}: {waits(sequence)} flights answered, after the handshake and banners"]
    for number, (sent, received) in enumerate(flights(sequence), 1):
        out = " ".join(NAMES.get(k, str(k)) for k in sent)
        back = " ".join(_runs([NAMES.get(k, str(k)) for k in received])) or "(nothing awaited)"
        lines.append(f"  {number:>2}. > {out}\n      < {back}")
    return lines


def _runs(names: list[str]) -> list[str]:
    """Repeated names once, with their count (the read's output is many CHANNEL_DATA)."""
    out: list[str] = []
    for name in names:
        if out and out[-1].split(" x")[0] == name:
            count = int(out[-1].split(" x")[1]) + 1 if " x" in out[-1] else 2
            out[-1] = f"{name} x{count}"
        else:
            out.append(name)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sandbox", default="rts")
    args = parser.parse_args()
    gpurig = [sys.executable, "-m", "gpurig", "sandbox"]
    subprocess.run([*gpurig, "up", "--name", args.sandbox, "--fleet", "1", "--full", "0"],
                   check=True, capture_output=True)  # fmt: skip
    from gpurig.sandbox.state import index_dir

    top = index_dir() / args.sandbox
    theirs = ssh_sequence(top / "ssh_config", "fleet-001")
    ours = drift_sequence(top / "inventory.yaml")
    print("\n".join(show("ssh fleet-001 true (OpenSSH)", theirs)))
    print("\n".join(show("gpurig drift, one host (paramiko)", ours)))


if __name__ == "__main__":
    main()
