"""A declared secret's value in a container's command or env, or a credential in a repo URL's
query, is refused by validate (exit 2, the key path, never the value): redaction in reports
does not keep it off the host's command lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpurig.spec.secret_use import secret_values

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
IMAGE = "r.example/x@sha256:" + "a" * 64
TOKEN = "hf_AbCdEf0123456789XyZabc"
NETRC = f"machine api.github.com\nlogin ryan\npassword ghp_{'x1' * 18}\n"


def inventory(
    tmp_path: Path, container: str, url: str = "https://example.org/x.git", netrc: str = NETRC
) -> Path:
    (tmp_path / "token").write_text(f"{TOKEN}\n")
    (tmp_path / "netrc").write_text(netrc)
    path = tmp_path / "fleet.yaml"
    path.write_text(
        f"""version: 1
hosts:
  a:
    address: 10.0.0.1
    ssh: {{host_key: "{HOST_KEY}"}}
    spec:
      engine: docker
      secrets:
        - {{src: {tmp_path}/token, dest: /root/.hf_token}}
        - {{src: {tmp_path}/netrc, dest: /root/.netrc}}
      containers:
        train: {{image: "{IMAGE}", {container}}}
      repos:
        /srv/code: {{url: "{url}", ref: "{"0" * 40}"}}
"""
    )
    return path


def validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpurig", "validate", str(path)], capture_output=True, text=True
    )


@pytest.mark.parametrize(
    ("container", "where"),
    [
        (f"env: {{HF_TOKEN: {TOKEN}}}", "containers.train.env.HF_TOKEN"),
        (f'command: [train, "--token={TOKEN}"]', "containers.train.command[1]"),
        (f"env: {{GH: ghp_{'x1' * 18}}}", "containers.train.env.GH"),
    ],
)
def test_a_secrets_value_in_a_container_is_refused(tmp_path: Path, container: str, where: str):
    done = validate(inventory(tmp_path, container))
    assert done.returncode == 2, done
    assert f"hosts.a.spec.{where}: holds the value of the secret {tmp_path}/" in done.stderr
    assert TOKEN not in done.stdout + done.stderr and "x1x1x1" not in done.stderr


def test_other_values_pass(tmp_path: Path):
    done = validate(inventory(tmp_path, "env: {HOST: api.github.com, N: '1'}"))
    assert done.returncode == 0, done


def test_a_credential_in_a_repo_urls_query_is_refused(tmp_path: Path):
    url = "https://gitlab.example/x.git?private_token=glpat-abcdefghij0123456789"
    done = validate(inventory(tmp_path, "env: {N: '1'}", url))
    assert done.returncode == 2
    assert 'repos["/srv/code"].url: the URL\'s query carries a credential (private_token=)' in (
        done.stderr
    )
    assert "glpat-" not in done.stderr


@pytest.mark.parametrize(
    ("netrc", "container", "where"),
    [
        # a 13-character password: no long word with letters and digits
        (
            "machine git.example.org login ryan password Tr0ub4dor&3xy\n",
            'env: {GIT_PASSWORD: "Tr0ub4dor&3xy"}',
            "containers.train.env.GIT_PASSWORD",
        ),
        # a short password, after the keyword that says it is one
        (
            "machine git.lan\nlogin ryan\npassword s3cr3t\n",
            'command: [train, "--password=s3cr3t"]',
            "containers.train.command[1]",
        ),
        # one line of a secret of several lines, none of its words long
        (
            "correct horse battery staple\nred lorry yellow lorry\n",
            'env: {PASSPHRASE: "red lorry yellow lorry"}',
            "containers.train.env.PASSPHRASE",
        ),
    ],
)
def test_a_secrets_value_of_any_length_or_shape_is_refused(
    tmp_path: Path, netrc: str, container: str, where: str
):
    done = validate(inventory(tmp_path, container, netrc=netrc))
    assert done.returncode == 2, done
    assert (
        f"hosts.a.spec.{where}: holds the value of the secret {tmp_path}/netrc (placed at "
        "/root/.netrc)"
    ) in done.stderr
    for value in ("Tr0ub4dor", "s3cr3t", "lorry"):
        assert value not in done.stdout + done.stderr


def test_a_netrcs_words_that_are_no_credential_pass(tmp_path: Path):
    netrc = "machine git.lan\nlogin ryan\npassword s3cr3t\ndefault login anonymous\n"
    env = "env: {HOST: git.lan, USER: ryan, A: machine, B: login, C: default, D: password}"
    done = validate(inventory(tmp_path, env, netrc=netrc))
    assert done.returncode == 0, done


def test_what_counts_as_a_secrets_value():
    assert secret_values(f"{TOKEN}\n") == {TOKEN}
    assert f"ghp_{'x1' * 18}" in secret_values(NETRC)
    assert secret_values("short\n") == {"short"}  # a file's whole content, whatever its length
    netrc = secret_values("machine git.lan login ryan password s3cr3t account acct-9\n")
    assert {"s3cr3t", "acct-9"} <= netrc
    assert not {"machine", "git.lan", "login", "ryan", "password", "account"} & netrc
    # the host after `machine` is no credential, however long
    assert not {"api.github.com", "machine"} & secret_values(NETRC)
    # KEY=VALUE: a credential's value whatever its length, another only when long
    env = secret_values("HF_TOKEN=abc\nDEBUG=1\nPORT=8080\nENDPOINT=https://hf.example.org\n")
    assert {"abc", "https://hf.example.org"} <= env
    assert not {"1", "8080", "DEBUG"} & env
    assert {"passwd", "tok", "sec"} <= secret_values("passwd: passwd\ntoken tok\nsecret=sec\n")
    assert secret_values("\n  \n") == set()
    key_file = secret_values('{\n  "type": "service_account",\n  "token": "t0k",\n}\n')
    assert "t0k" in key_file and not {"{", "}"} & key_file
