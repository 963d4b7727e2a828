"""Loader behaviour beyond single refusals: merging, several files, collecting problems."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpurig.spec.inventory import (
    InventoryError,
    deep_merge,
    format_path,
    load_inventory,
    mount_problem,
)
from gpurig.spec.model import normalise

DIGEST = "sha256:" + "0" * 64


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def test_deep_merge_merges_maps_and_replaces_lists_and_scalars() -> None:
    base = {"a": {"x": 1, "y": [1, 2]}, "b": 1, "keep": True}
    override = {"a": {"y": [3], "z": 2}, "b": {"now": "map"}}
    assert deep_merge(base, override) == {
        "a": {"x": 1, "y": [3], "z": 2},
        "b": {"now": "map"},
        "keep": True,
    }
    assert base == {"a": {"x": 1, "y": [1, 2]}, "b": 1, "keep": True}  # inputs untouched


@pytest.mark.parametrize(
    "mount", ["/home/u/SkyRL:/workspace/SkyRL", "/mnt:/mnt:ro", "data:/data:Z,rshared"]
)
def test_mount_problem_accepts_volumes_and_bind_mounts(mount: str) -> None:
    assert mount_problem(mount) is None


def test_format_path_quotes_keys_that_are_not_plain_words() -> None:
    path = ("hosts", "a100-1", "spec", "repos", "/srv/code", "python", "keep", 0)
    assert format_path(path) == 'hosts.a100-1.spec.repos["/srv/code"].python.keep[0]'


def test_merge_precedence_defaults_then_groups_in_listed_order_then_host(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "fleet.yaml",
        f"""
        version: 1
        defaults:
          ssh: {{user: root, port: 2200}}
          spec:
            gpu: auto
            packages: [tmux, htop]
            checks: {{disk_free_min: 10g, inodes_free_min_pct: 5}}
        groups:
          first:
            ssh: {{user: first}}
            spec:
              gpu: absent
              checks: {{disk_free_min: 20g}}
              containers:
                c: {{image: "img@{DIGEST}", shm_size: 1g, env: {{A: "1", B: "1"}}}}
          second:
            spec:
              gpu: required
              containers:
                c: {{env: {{B: "2"}}, mounts: ["/a:/a"]}}
        hosts:
          h:
            address: 203.0.113.5
            groups: [first, second]
            spec:
              packages: [git]
              containers:
                c: {{mounts: ["/b:/b"]}}
          plain:
            address: 203.0.113.6
        """,
    )
    h, plain = load_inventory([path]).hosts
    assert h.groups == ("first", "second")
    assert (h.ssh.user, h.ssh.port) == ("first", 2200)
    assert h.spec["gpu"] == "required"  # the later group wins over the earlier one
    assert h.spec["packages"] == ["git"]  # lists replace, never append
    assert h.spec["checks"] == {"disk_free_min": "20g", "inodes_free_min_pct": 5}
    container = h.spec["containers"]["c"]
    assert {k: container[k] for k in ("image", "shm_size", "mounts")} == {
        "image": f"img@{DIGEST}",
        "shm_size": "1g",
        "mounts": ["/b:/b"],
    }
    assert container["env"] == {"PYTHONUNBUFFERED": "1", "A": "1", "B": "2"}  # maps merge
    assert plain.spec == normalise(
        {
            "gpu": "auto",
            "packages": ["tmux", "htop"],
            "checks": {"disk_free_min": "10g", "inodes_free_min_pct": 5},
        }
    )
    assert plain.spec["engine"] == "none" and plain.spec["core_dumps"] == "disabled"
    assert (plain.ssh.user, plain.groups) == ("root", ())


def test_hosts_keep_file_order_source_and_line_across_files(tmp_path: Path) -> None:
    one = _write(tmp_path, "one.yaml", "version: 1\nhosts:\n  z: {address: 203.0.113.1}\n")
    two = _write(
        tmp_path,
        "two.yaml",
        "version: 1\nhosts:\n  b: {address: 203.0.113.2}\n\n  a: {address: 203.0.113.3}\n",
    )
    hosts = load_inventory([one, two]).hosts
    assert [(h.name, h.source, h.line) for h in hosts] == [
        ("z", str(one), 3),
        ("b", str(two), 3),
        ("a", str(two), 5),
    ]


def test_host_defined_in_two_files_is_refused_at_the_second(tmp_path: Path) -> None:
    one = _write(tmp_path, "one.yaml", "version: 1\nhosts:\n  a100-1: {address: 203.0.113.1}\n")
    two = _write(
        tmp_path,
        "two.yaml",
        "version: 1\nhosts:\n  b: {address: 203.0.113.2}\n  a100-1: {address: 203.0.113.3}\n",
    )
    with pytest.raises(InventoryError) as info:
        load_inventory([one, two])
    assert str(info.value) == (
        f"{two}:4: hosts.a100-1: host 'a100-1' is already defined at {one}:3"
    )


def test_every_problem_is_reported_in_line_order_across_files(tmp_path: Path) -> None:
    bad = _write(
        tmp_path,
        "bad.yaml",
        """
        version: 1
        hosts:
          a:
            address: 203.0.113.1
            groups: [missing]
            spec:
              engine: dockr
              containers:
                c: {image: "busybox:1", mounts: ["x"]}
        """,
    )
    missing = tmp_path / "missing.yaml"
    with pytest.raises(InventoryError) as info:
        load_inventory([bad, missing])
    lines = str(info.value).splitlines()
    assert [line.split(": ")[0] for line in lines] == [
        f"{bad}:5",
        f"{bad}:7",
        f"{bad}:9",
        f"{bad}:9",
        str(missing),
    ]
    assert lines[-1] == f"{missing}: cannot read: No such file or directory"


def test_groups_lists_hosts_per_group_in_host_order(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "fleet.yaml",
        """
        version: 1
        groups: {g: {}, h: {}}
        hosts:
          b: {address: 203.0.113.2, groups: [h, g]}
          a: {address: 203.0.113.1, groups: [g]}
        """,
    )
    assert load_inventory([path]).groups() == {"h": ["b"], "g": ["b", "a"]}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"version: 1\nhosts:\n  ? [a, b]\n  : {address: x}\n", ":3: hosts[\"('a', 'b')\"]: "),
        (b"version: 1\nhosts:\n  1: {address: x}\n", ":3: hosts[1]: expected a name"),
        (b"- a\n", ":1: expected a mapping; got a list"),
        (b"\xff\xfe", ":1: cannot read: not UTF-8 (byte 0xff)"),
    ],
)
def test_odd_documents_are_refused_not_crashed_on(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "odd.yaml"
    path.write_bytes(content)
    with pytest.raises(InventoryError) as info:
        load_inventory([path])
    assert str(info.value).startswith(f"{path}{expected}")
