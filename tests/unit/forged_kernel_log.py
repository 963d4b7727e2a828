"""Kernel-log lines in which an account's own text, not the kernel, says an Xid, an SXid, a hung
task or a GPU fallen off the bus: a crashing program's mapped file name in the kernel's segfault
line (kbasename of the file: any text without '/', newlines included), a command name in an
audit record. Each prefix below is one the kernel-log read meets (dmesg, dmesg -T, ISO times,
dmesg -x, journalctl -k, syslog with the kernel's stamp, a journal line with its date cut, dmesg
-r, no prefix). None of these lines is an event; the same texts as whole messages are."""

from __future__ import annotations

XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."
FALLEN = "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."
FALLEN_AT = "NVRM: GPU at 0000:3b:00.0 has fallen off the bus."
SXID = "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 1 LTSSM Fault Up"
HUNG = "INFO: task pt_nccl_watchdg:785 blocked for more than 120 seconds."
# Every message the parsers take as an event.
MESSAGES = (XID, FALLEN, FALLEN_AT, SXID, HUNG)

PREFIXES = (
    "[ 8123.456789] ",
    "[Mon Jan  1 00:00:00 2024] ",
    "2024-11-15T12:02:03,470068+00:00 ",
    "kern  :err   : 2025-01-21T02:21:33,498559+00:00 ",
    "Jan 18 11:38:05 gpu01 kernel: ",
    "Jan 18 11:38:05 gpu01 kernel: [ 8123.456789] ",
    "kernel: ",
    "<3>[ 8123.456789] ",
    "",
)


def segfault(name: str, prefix: str = "[ 8123.456789] ") -> str:
    """The kernel's line for a program that crashed in a mapped file called `name` (the real
    line an account made, its file named like an Xid)."""
    return (
        f"{prefix}python3[785]: segfault at 0 ip 00007f1c2a3b4c5d sp 00007ffd1e2f3a40 error 4 "
        f"in {name}[7f1c2a3b4000+1000] likely on CPU 3 (core 3, socket 0)"
    )


def audit(comm: str, prefix: str = "[ 8124.000001] ") -> str:
    """An audit record naming the command `comm`."""
    return (
        f'{prefix}audit: type=1400 audit(1700000000.123:45): apparmor="DENIED" '
        f'operation="open" profile="/usr/bin/x" name="/tmp/x" pid=785 comm="{comm}" '
        'requested_mask="r" denied_mask="r" fsuid=1000 ouid=0'
    )


# The real line from a plain account's crash, as it reached root's node contract.
REAL_SEGFAULT = segfault(XID)

# A file name with a newline in it: dmesg prints the rest of the segfault message as an indented
# continuation line, as it prints the second and third lines of the driver's probe message.
CONTINUED = (
    segfault(f"x\n{' ' * 15}{FALLEN}")
    + "\n"
    + segfault(
        f"x\n{' ' * 15}NVRM: The NVIDIA GPU 0000:3b:00.0\n{' ' * 15}NVRM: fallen off the bus."
    )
    + "\n"
    + segfault(f"NVRM: The NVIDIA GPU 0000:3b:00.0\n{' ' * 15}NVRM: fallen off the bus.")
)

FORGED = (
    "\n".join(
        [segfault(m, p) for m in MESSAGES for p in PREFIXES]
        + [audit(m, p) for m in MESSAGES for p in PREFIXES]
        + [f"[ 8123.456789] python3[785]: {m}" for m in MESSAGES]
        + [CONTINUED]
    )
    + "\n"
)

# A real probe-time message that names a GPU and is no fault (an open module on a GPU without
# GSP, NVIDIA/open-gpu-kernel-modules osapi.c), then the kernel's lines for programs whose file
# names go on, indented, as if that message did: none of them is its line.
NOT_SUPPORTED = (
    "[    5.100000] NVRM: The NVIDIA GPU 0000:3b:00.0 (PCI ID: 10de:1db1)\n"
    + "".join(
        f"{' ' * 15}NVRM: {rest}\n"
        for rest in (
            "installed in this system is not supported by open",
            "nvidia.ko because it does not include the required GPU",
            "System Processor (GSP).",
            "Please see the 'Open Linux Kernel Modules' and 'GSP",
            "Firmware' sections in the driver README, available on",
            "the Linux graphics driver download page at",
            "www.nvidia.com.",
        )
    )
    + "[    5.100100] NVRM: The NVIDIA probe routine failed for 1 device(s).\n"
)
_ON = f"\n{' ' * 15}"  # a newline in the file name: the rest goes on, indented
AFTER_A_PROBE = NOT_SUPPORTED + "".join(
    segfault(name) + "\n"
    for name in (
        f"x{_ON}NVRM: fallen off the bus and is not responding to commands.",
        f"x{_ON}NVRM: fallen off the bus. NVRM: Xid (PCI:0000:3b:00): 79, x",
        f"x{_ON}NVRM: INFO: task a:1 blocked for more than 1 s{_ON}NVRM: fallen off the bus.",
        f"x{_ON}NVRM: The NVIDIA GPU 0000:3b:00.0{_ON}NVRM: fallen off the bus.",
    )
)
