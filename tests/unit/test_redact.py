"""Credentials never printed: env values by key name and by shape, command arguments, remote
URLs, the converge's own `run` command (no env value in it); each rendered in every report
format."""

from __future__ import annotations

from typing import Any

import pytest

from gpurig.deploys.containers import run_command
from gpurig.plans.repos import plan as repos_plan
from gpurig.report.formats import FORMATS
from gpurig.report.render import render
from gpurig.spec.container import diff_container
from gpurig.spec.finding import Difference, Finding, HostReport
from gpurig.spec.model import normalise
from gpurig.spec.redact import REDACTED, redacted

IMAGE = "registry.example/train@sha256:" + "a" * 64
# (key, value, what must never be printed): the three, then by shape alone.
SECRETS = [
    ("OPENAI_KEY", "sk-proj-Zq3xT0k8eXaMpLe4uH9w", "Zq3xT0k8eXaMpLe4uH9w"),
    ("WANDB_KEY", "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c", "0f1e2d3c4b5a6978"),
    ("DATABASE_URL", "postgres://train:pw-Sup3r@db.internal:5432/runs", "pw-Sup3r"),
    ("HF", "hf_aBcDeFgHiJkLmNoPqRsTuVwX", "aBcDeFgHiJkLmNoP"),  # a key name that says nothing
    ("GIT_REMOTE", "https://ghp_0123456789abcdefABCDEF01@github.com/o/r", "0123456789abcdef"),
    ("AWS_ID", "AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    ("MY_PASSWORD", "hunter2", "hunter2"),
    ("DB_PASS", "correct horse", "correct horse"),
    ("X_AUTH_HEADER", "Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
    ("S3", "https://bucket.s3.example/x?X-Amz-Signature=9f8e7d6c5b4a", "9f8e7d6c5b4a"),
    ("RANDOM", "q8ZrT2vYx7WbN4mK1pLs6Hd3Jf9Gc5Ae", "q8ZrT2vYx7WbN4mK1pLs6Hd3Jf9Gc5Ae"),
]
PLAIN = {"PYTHONUNBUFFERED": "1", "MODEL": "meta-llama/Llama-3.1-8B-Instruct",
         "HF_HOME": "/workspace/hf", "CUDA_VISIBLE_DEVICES": "0,1,2,3",
         "NCCL_SOCKET_IFNAME": "eth0", "LR": "3e-4"}  # fmt: skip


def inspect_with(env: dict[str, str], cmd: list[str]) -> dict[str, Any]:
    return {"Config": {"Image": IMAGE, "Env": [f"{k}={v}" for k, v in env.items()], "Cmd": cmd}}


def reports(expected: str, actual: str) -> list[HostReport]:
    differs = (Difference("env", expected, actual, "container.env"),)
    found = Finding("container.env", "error", "env", expected, actual, "recreate",
                    subject="container t", action="refused", differences=differs)  # fmt: skip
    return [HostReport("h", True, [found])]


@pytest.mark.parametrize(("key", "value", "hidden"), SECRETS, ids=[s[0] for s in SECRETS])
def test_env_credentials_by_name_or_shape_reach_no_report(
    faults: Any, key: str, value: str, hidden: str
):
    spec = normalise({"containers": {"t": {"image": IMAGE, "env": {key: value, **PLAIN}}}})
    wanted = spec["containers"]["t"]
    diffs = diff_container(wanted, inspect_with({key: "old", **PLAIN}, []), "docker")
    [diff] = [d for d in diffs if d.field == "env"]
    texts = [render(reports(diff.expected, diff.actual), fmt) for fmt in FORMATS]
    faults.rendered += len(texts)
    faults.secrets_seen += sum(hidden in text for text in texts)
    assert not any(hidden in text for text in texts)
    assert REDACTED in diff.expected
    for plain in PLAIN.values():  # what is not a credential is still shown
        assert plain in diff.expected


def test_credentials_in_a_command_are_hidden_by_option_and_shape():
    cmd = ["python", "train.py", "--api-key", "hunter2", "--token=s3cr3t-v4lue", "--lr", "3e-4",
           "hf_aBcDeFgHiJkLmNoPqRsTuVwX", "--wandb-entity", "team"]  # fmt: skip
    spec = normalise({"containers": {"t": {"image": IMAGE, "command": cmd}}})
    diffs = diff_container(spec["containers"]["t"], inspect_with({}, ["sleep"]), "docker")
    [diff] = [d for d in diffs if d.field == "command"]
    for hidden in ("hunter2", "s3cr3t-v4lue", "aBcDeFgHiJkLmNoP"):
        assert hidden not in diff.expected
    assert "'--token=<redacted>' --lr 3e-4" in diff.expected
    assert diff.expected.endswith("--wandb-entity team")


def test_a_token_in_a_remote_url_is_not_shown():
    token = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"
    url = "https://github.com/org/code.git"
    spec = normalise({"repos": {"/w/code": {"url": url, "ref": "0" * 40}}})
    state = {"exists": True, "checkout": True, "dirt": [], "local": [], "attributes": [],
             "origin": f"https://x-access-token:{token}@github.com/org/code.git"}  # fmt: skip
    [change] = [c for c in repos_plan(spec, lambda cls, **kwargs: state) if c.id.startswith("repo")]
    assert change.id == "repo.origin" and token not in change.actual
    assert change.actual == f"https://x-access-token:{REDACTED}@github.com/org/code.git"


@pytest.mark.parametrize(("key", "value", "hidden"), SECRETS, ids=[s[0] for s in SECRETS])
def test_the_run_command_carries_no_env_value_shown_or_sent(key: str, value: str, hidden: str):
    """The environment reaches the host as an uploaded file (deploys/containers.py)."""
    spec = normalise({"containers": {"t": {"image": IMAGE, "env": {key: value}}}})
    data = {"engine": "docker", "container": "t", "spec": spec["containers"]["t"], "env": ""}
    command = run_command(data, "/tmp/gpurig-stage")
    assert hidden not in command.get_raw_value() and hidden not in str(command)
    assert " --env-file /tmp/gpurig-stage/upload " in command.get_raw_value()


@pytest.mark.parametrize(
    ("key", "value"),
    [("GPU_NAME", "NVIDIA H100 80GB HBM3"), ("IMAGE", IMAGE), ("PATH", "/usr/bin:/bin"),
     ("URL", "https://example.com/a?b=1"), ("N", 123)],
)  # fmt: skip
def test_values_that_are_not_credentials_are_left_alone(key: str, value: Any):
    assert redacted(key, value) == value
