"""The container field table: spec-vs-inspect comparison for both engines' inspect shapes."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gpurig.spec.container import (
    FIELD_NAMES,
    FieldDiff,
    actual_gpus,
    actual_mounts,
    actual_ulimits,
    diff_container,
    env_file_content,
    run_argv,
)
from gpurig.spec.inventory import schema
from gpurig.spec.model import normalise


def test_every_container_key_is_a_field_or_converge_policy() -> None:
    declared = set(schema()["$defs"]["container"]["properties"])
    assert declared - set(FIELD_NAMES) == {"recreate", "omp_num_threads"}


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        ([{"Count": -1, "Capabilities": [["gpu"]]}], "all"),
        ([{"Count": 2, "Capabilities": [["gpu"]]}], 2),
        ([{"Count": 0, "DeviceIDs": ["3", "1"], "Capabilities": [["gpu"]]}], [1, 3]),
        ([{"Count": -1, "Capabilities": [["tpu"]]}], "none"),
        (None, "none"),
    ],
)
def test_docker_device_requests(requests: Any, expected: Any) -> None:
    assert actual_gpus({"HostConfig": {"DeviceRequests": requests}}, "docker") == expected


def test_podman_cdi_devices_and_counts() -> None:
    devices = [{"PathOnHost": f"nvidia.com/gpu={i}"} for i in (1, 0)] + [
        {"PathOnHost": "/dev/fuse"}
    ]
    inspect = {"HostConfig": {"Devices": devices}}
    assert actual_gpus(inspect, "podman") == [0, 1]
    assert diff_container({"gpus": 2}, inspect, "podman") == []
    assert diff_container({"gpus": [0, 1]}, inspect, "podman") == []
    assert diff_container({"gpus": 3}, inspect, "podman") == [FieldDiff("gpus", "3", "0, 1")]
    assert diff_container({"gpus": "none"}, {"HostConfig": {}}, "podman") == []


def test_podman_ulimit_names_and_uint64_unlimited() -> None:
    inspect = {"HostConfig": {"Ulimits": [
        {"Name": "RLIMIT_MEMLOCK", "Soft": 2**64 - 1, "Hard": 2**64 - 1},
        {"Name": "RLIMIT_NOFILE", "Soft": 1024, "Hard": 4096},
    ]}}  # fmt: skip
    assert actual_ulimits(inspect) == {"memlock": (-1, -1), "nofile": (1024, 4096)}
    assert (
        diff_container({"ulimits": {"memlock": -1, "nofile": "1024:4096"}}, inspect, "podman") == []
    )
    [diff] = diff_container({"ulimits": {"core": 0}}, inspect, "podman")
    assert (diff.field, diff.expected, diff.actual) == ("ulimits", "core=0:0", "core=(unset)")


def test_mounts_read_volumes_by_name_and_fall_back_to_binds() -> None:
    mounts = [
        {"Type": "volume", "Name": "nb", "Source": "/var/lib/x", "Destination": "/w", "RW": True}
    ]
    assert actual_mounts({"Mounts": mounts}) == ["nb:/w"]
    binds = {"HostConfig": {"Binds": ["/mnt:/mnt:ro,rslave"]}}
    assert actual_mounts(binds) == ["/mnt:/mnt:ro"]
    assert diff_container({"mounts": ["/mnt:/mnt:ro"]}, binds, "docker") == []


def test_only_declared_fields_and_env_keys_are_compared() -> None:
    inspect = {"Config": {"Env": ["A=1", "OTHER=x"], "User": ""}, "HostConfig": {}}
    assert diff_container({"env": {"A": "1"}, "recreate": "never"}, inspect, "docker") == []
    assert diff_container({"user": "root"}, inspect, "docker") == [
        FieldDiff("user", "root", "(image default)")
    ]


def test_image_compares_digests_and_restart_policies() -> None:
    digest = "sha256:" + "0" * 64
    inspect = {"ImageName": f"docker.io/x@{digest}", "HostConfig": {"RestartPolicy": {"Name": ""}}}
    assert diff_container({"image": f"registry/x@{digest}"}, inspect, "podman") == []
    assert diff_container({"restart": {"policy": "no"}}, inspect, "podman") == []
    [diff] = diff_container(
        {"restart": {"policy": "on-failure", "max_retries": 3}}, inspect, "docker"
    )
    assert (diff.expected, diff.actual) == ("on-failure:3", "no")


def test_values_are_shown_as_a_person_reads_them() -> None:
    """Sizes in binary units, limits as soft:hard, env as KEY=value (credentials redacted),
    lists joined: never a Python repr or a raw byte count."""
    spec = {
        "shm_size": "512g",
        "mounts": ["/srv/train:/workspace/train:ro", "/mnt:/mnt"],
        "env": {"PYTHONUNBUFFERED": "1", "HF_TOKEN": "hf_abc123"},
        "ulimits": {"core": 0, "nofile": "1024:20000", "memlock": -1},
        "command": ["python", "train.py", "--api-key", "sk-live-1", "--wandb-token=abc"],
    }
    inspect = {
        "Config": {"Env": ["PYTHONUNBUFFERED=0"], "Cmd": ["sleep", "infinity"]},
        "HostConfig": {"ShmSize": 64 * 1024**2, "Ulimits": []},
        "Mounts": [],
    }
    shown = {d.field: (d.expected, d.actual) for d in diff_container(spec, inspect, "docker")}
    assert shown == {
        "shm_size": ("512 GiB", "64 MiB"),
        "mounts": ("/mnt:/mnt, /srv/train:/workspace/train:ro", "none"),
        "env": ("PYTHONUNBUFFERED=1 HF_TOKEN=<redacted>", "PYTHONUNBUFFERED=0 HF_TOKEN=(unset)"),
        "ulimits": (
            "core=0:0 memlock=unlimited:unlimited nofile=1024:20000",
            "core=(unset) memlock=(unset) nofile=(unset)",
        ),
        "command": (
            "python train.py --api-key '<redacted>' '--wandb-token=<redacted>'",
            "sleep infinity",
        ),
    }


def test_run_argv_takes_the_environment_from_the_env_file_only() -> None:
    token = "hf_Zq3xT0k8eXaMpLe4uH9wQ2"
    image = "registry.example/train@sha256:" + "a" * 64
    declared = {"image": image, "env": {"HF_TOKEN": token}, "command": ["sleep", "1"]}
    spec = normalise({"containers": {"t": declared}})["containers"]["t"]
    argv = run_argv("podman", "t", spec, "/tmp/gpurig-s/upload")
    assert argv[:7] == ["podman", "run", "--detach", "--name", "t", "--env-file",
                        "/tmp/gpurig-s/upload"]  # fmt: skip
    assert "--env" not in argv and not [a for a in argv if token in a or "PYTHONUNBUFFERED" in a]
    assert argv[-3:] == [image, "sleep", "1"]


def test_env_file_content_is_one_line_a_key_with_the_value_as_it_is() -> None:
    """Docker and Podman take everything after the first `=` as the value: no quoting, no
    expansion, spaces, quotes, `=`, `#` and tabs kept."""
    env = {"B": "x = 'y' \"z\" $HOME #c\t ", "A": "", "C": "sk-ünï"}
    assert env_file_content(env) == "A=\nB=x = 'y' \"z\" $HOME #c\t \nC=sk-ünï\n".encode()
    assert env_file_content({}) == b""


def test_env_values_the_schema_accepts_are_one_line_of_the_env_file() -> None:
    """The engines read the file line by line (a CR before the newline is dropped): a value
    with a line break or NUL is refused at validation, a tab is kept."""
    value = re.compile(
        schema()["$defs"]["container"]["properties"]["env"]["additionalProperties"]["pattern"]
    )
    breaks = [chr(c) for c in (*range(0x20), 0x7F, 0x85, 0x2028, 0x2029) if c != 0x09]
    assert [c for c in breaks if value.search(f"a{c}b")] == []
    assert value.search("a\tb") and not value.search("a\n")
