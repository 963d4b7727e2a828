"""Which failed connections are tried again (gpurig.remote.retry): a failure before the host
answered (pyinfra's words for it), never a refusal the host made. The sandbox's relay that
drops a first connection: tests/integration/test_retries.py."""

from __future__ import annotations

import pytest

from gpurig.remote import retry


@pytest.mark.parametrize(
    ("said", "again"),
    [
        ("Could not connect ([Errno 111] Connection refused)", True),
        ("Could not connect (timed out)", True),
        ("Could not connect ([Errno None] Unable to connect to port 22 on 203.0.113.7)", True),
        ("SSH error (Error reading SSH protocol banner)", True),
        ("SSH error (No existing session)", True),
        ("EOF error ()", True),
        ("Authentication error (username=root, key=/home/me/.ssh/id)", False),
        ("SSH host key error (Host key for 203.0.113.7 does not match.)", False),
        ("SSH error (Server '[203.0.113.7]:22' not found in known_hosts)", False),
        ("Could not resolve hostname ([Errno -2] Name or service not known)", False),
    ],
)
def test_only_a_host_that_did_not_answer_is_tried_again(said: str, again: bool) -> None:
    assert retry.blinked(said) is again


def test_the_pauses_grow_and_are_bounded() -> None:
    assert [retry.pause(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 2.0, 2.0]


def test_the_converge_takes_the_retries_it_was_given() -> None:
    assert retry.from_env({}) == retry.RETRIES
    assert retry.from_env({retry.ENV_VAR: "0"}) == 0
    assert retry.from_env({retry.ENV_VAR: "x"}) == retry.RETRIES
    assert retry.pyinfra_data(3)["ssh_connect_retries"] == 3
