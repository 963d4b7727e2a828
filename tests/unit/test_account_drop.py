"""What root runs as another account (an environment's import check, a file placed in her
directory, a leftover removed there) runs as that account alone: setpriv kept root's session
keyring, so her python read a key a root session had put there. Run for real: a key added to
a session keyring of root's, then what the dropped account can see of it."""

from __future__ import annotations

import ctypes
import os
import subprocess

import pytest

from gpurig.facts.safe_path import AS_ACCOUNT

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or os.uname().machine != "x86_64",
    reason="root drops to another account; the key is added by x86_64's add_key syscall",
)
NOBODY = 65534
SECRET = b"gpurig-test-root-session-key"


def in_a_root_session_with_a_key(command: list[str]) -> subprocess.CompletedProcess[str]:
    """`command` run by a child of root's that joined a session keyring of its own holding a
    key (the way a root session's keys sit there), so this test's own keyring is left alone."""

    def keyed() -> None:  # pragma: no cover (runs in the child before its exec)
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.syscall(250, 1, None) >= 0  # keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)
        # add_key("user", SECRET, "s3cret", 6, KEY_SPEC_SESSION_KEYRING)
        assert libc.syscall(248, b"user", SECRET, b"s3cret", 6, -3) >= 0

    return subprocess.run(command, preexec_fn=keyed, capture_output=True, text=True, timeout=60)


def as_account(*argv: str) -> list[str]:
    return ["sh", "-c", f'{AS_ACCOUNT}\nas_account "$@"', "sh", str(NOBODY), str(NOBODY),
            "--clear-groups", *argv]  # fmt: skip


def test_the_key_is_there_for_a_plain_setpriv() -> None:
    """The test's own check: the key is visible through setpriv alone, as it was before."""
    seen = in_a_root_session_with_a_key(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "cat",
         "/proc/keys"]
    )  # fmt: skip
    assert SECRET.decode() in seen.stdout, seen


def test_the_dropped_account_has_a_keyring_of_its_own() -> None:
    seen = in_a_root_session_with_a_key(as_account("cat", "/proc/keys"))
    assert seen.returncode == 0, seen.stderr
    assert SECRET.decode() not in seen.stdout


def test_the_dropped_account_is_bounded_and_has_nothing_of_roots() -> None:
    seen = in_a_root_session_with_a_key(
        as_account("sh", "-c", "id -u; id -G; ulimit -v; ulimit -t; env")
    )
    assert seen.returncode == 0, seen.stderr
    uid, groups, memory, cpu, *env = seen.stdout.splitlines()
    assert (uid, groups) == (str(NOBODY), str(NOBODY))
    assert (memory, cpu) == (str(4 * 1024**2), "600")  # KiB of address space, CPU seconds
    assert not any(line.startswith(("SUDO_", "PYTHON", "LD_")) for line in env)
