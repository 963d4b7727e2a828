"""Hostile input, everywhere gpurig reads or renders it: inventory values that would reach a
command or a file, files that hang or explode a parser, YAML pin must not crash on, and host
output that would forge or break a report. Every refusal is a message naming the file, line and
key, within a second; the session's last line tallies what was tried (see conftest.Faults).
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator
from ruamel.yaml import YAML

from benchmarks.fleet_scale import fleet_inventory
from gpurig.cli.main import main
from gpurig.onboard.onboard import Check, render_checks
from gpurig.onboard.pin import PinInputError, pin_text
from gpurig.remote.pyinfra_inventory import load_groups
from gpurig.report.render import render, to_json, to_junit, to_markdown, to_table
from gpurig.spec import safe_yaml
from gpurig.spec.finding import Difference, Finding, HostReport
from gpurig.spec.inventory import (
    InventoryError,
    format_path,
    load_inventory,
    load_spec_file,
    schema,
)
from gpurig.spec.roundtrip_yaml import bounded_yaml, load
from gpurig.spec.safe_yaml import MAX_DEPTH, Bounds, parse
from gpurig.spec.text_file import MAX_BYTES, YamlRefused
from gpurig.spec.textsafe import UNSAFE, visible

ROOT = Path(__file__).resolve().parents[2]
PYINFRA = Path(sys.executable).with_name("pyinfra")
REFUSAL_SECONDS = 1.0
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKswQKA/As8u2Q0Gc1qWDzk+UhfqSF14YObfvwkjkE2q"
DIGEST = "sha256:" + "ab" * 32
IMAGE = f"registry.example:5000/team/train:v1@{DIGEST}"
REF = "0123456789abcdef0123456789abcdef01234567"

# A valid inventory with one of every string the schema has; each case below replaces one.
BASE: dict[str, Any] = {
    "version": 1,
    "groups": {"g": {}},
    "hosts": {
        "a": {
            "address": "203.0.113.1",
            "groups": ["g"],
            "ssh": {"port": 22, "user": "root", "key": "~/.ssh/id", "host_key": KEY,
                    "connect_timeout": 10},
            "spec": {
                "engine": "docker",
                "insecure_registries": ["10.0.0.5:5000"],
                "nvidia_toolkit": {"version": "1.17.8-1", "repo": "https://mirror.example/x",
                                   "key": "https://mirror.example/key"},
                "packages": ["tmux"],
                "containers": {
                    "c": {"image": IMAGE, "shm_size": "1g", "user": "1000:1000", "gpus": 2,
                          "mounts": ["/srv/data:/data:ro"], "env": {"A": "1"},
                          "ulimits": {"nofile": "1024:4096"}, "command": ["sleep", "inf"]},
                },
                "repos": {
                    "/srv/code": {"url": "https://github.com/org/code.git", "ref": REF,
                                  "python": {"lockfile": "uv.lock", "venv": "/srv/venv",
                                             "keep": ["torch"]}},
                },
                "secrets": [{"src": "~/.netrc", "dest": "/root/.netrc", "mode": "0600",
                             "owner": "root"}],
                "checks": {"disk_free_min": "50g", "inodes_free_min_pct": 10},
            },
        },
    },
}  # fmt: skip

KEY_OF = object()  # a path step meaning "the key itself", for names and env variables
HOST = ("hosts", "a")
SPEC = (*HOST, "spec")
CONTAINER = (*SPEC, "containers", "c")
REPO = (*SPEC, "repos", "/srv/code")
SECRET = (*SPEC, "secrets", 0)

# (field, path, hostile values, whether plain jsonschema refuses them too: False where only
# gpurig's loader can, because JSON cannot tell 22.0 from 22 or a key's blob is cut short)
FIELDS: list[tuple[str, tuple[Any, ...], list[Any], bool]] = [
    ("host name", ("hosts", KEY_OF), ["a\n", "-a", "a b", "a\x1b[2J"], True),
    ("group name", ("groups", KEY_OF), ["g\n", "all"], True),
    ("address", (*HOST, "address"),
     ["203.0.113.1\n", "-oProxyCommand=sh", "a b", "203.0.113.1\x00"], True),
    ("ssh.port", (*HOST, "ssh", "port"), ["22", 0, 70000], True),
    ("ssh.port as YAML writes it", (*HOST, "ssh", "port"), [22.0, True], False),
    ("ssh.connect_timeout", (*HOST, "ssh", "connect_timeout"), [0, 10**20], True),
    ("ssh.connect_timeout as YAML writes it", (*HOST, "ssh", "connect_timeout"), [10.0], False),
    ("ssh.user", (*HOST, "ssh", "user"), ["root\n", "-oProxyCommand=x", "ro ot", ""], True),
    ("ssh.key", (*HOST, "ssh", "key"), ["~/.ssh/id\n", "a\x00b", ""], True),
    ("ssh.host_key", (*HOST, "ssh", "host_key"), [KEY + "\n", KEY.replace(" ", "  ")], True),
    ("ssh.host_key blob", (*HOST, "ssh", "host_key"),
     [KEY[:-4], KEY[:-8], "ssh-rsa " + KEY.split()[1]], False),
    ("packages", (*SPEC, "packages", 0),
     ["-oDPkg::Pre-Invoke::=touch /tmp/pwned", "tmux\n", "Tmux", "t", "tmux=1.0"], True),
    ("nvidia_toolkit.version", (*SPEC, "nvidia_toolkit", "version"),
     ["1.17.8-1\nPackage: *\nPin: release *\nPin-Priority: -1", "1.17.8-1\n", "latest",
      "-1"], True),
    ("nvidia_toolkit.repo", (*SPEC, "nvidia_toolkit", "repo"),
     ["https://x/ y", "https://x/\n", "ftp://x", "https://x/\x1b"], True),
    ("insecure_registries", (*SPEC, "insecure_registries", 0),
     ["-x", "reg\n", 'reg"\ninsecure = true', "reg:5000:1"], True),
    ("container name", (*SPEC, "containers", KEY_OF), ["c\n", "-c"], True),
    ("image", (*CONTAINER, "image"),
     [f"-v/:/host@{DIGEST}", IMAGE + "\n", f"a b@{DIGEST}", f"team/X@{DIGEST}", "busybox"],
     True),
    ("shm_size", (*CONTAINER, "shm_size"), ["1g\n", "9" * 20 + "g", "-1g"], True),
    ("container user", (*CONTAINER, "user"), ["root\n", "--privileged", "a b"], True),
    ("gpus", (*CONTAINER, "gpus"), [2.0, True], False),
    ("mounts", (*CONTAINER, "mounts", 0), ["/a:/b\n", "/a:/b\x1b", ""], True),
    ("mount structure", (*CONTAINER, "mounts", 0), ["/a:b", "/a:/b:rw,exec=1"], False),
    ("env name", (*CONTAINER, "env", KEY_OF), ["A\n", "1A", "A=B"], True),
    ("env value", (*CONTAINER, "env", "A"), ["a\x00b", "a\x1b[2J", "a\rb", "a\nB=1", "a\n", 1],
     True),
    ("ulimits", (*CONTAINER, "ulimits", "nofile"), ["1024:4096\n", "1" * 30 + ":1"], True),
    ("command", (*CONTAINER, "command", 0), ["a\x00", "\x1b]8;;http://x\x07", "a\rb"], True),
    ("repo path", (*SPEC, "repos", KEY_OF),
     ["/srv/x\n", "/srv/../etc", "/srv/x/", "srv/x", "/srv/./x", "/"], True),
    ("repo url", (*REPO, "url"),
     ["ext::sh -c touch% /tmp/pwned", "https://x/\n", "-uhttps://x", "--upload-pack=touch x",
      "fd::17"], True),
    ("repo ref", (*REPO, "ref"), [REF + "\n", REF.upper()], True),
    ("lockfile", (*REPO, "python", "lockfile"),
     ["../../etc/shadow", "/etc/shadow", "uv.lock\n", "-r/etc/x", "a/../../b"], True),
    ("venv", (*REPO, "python", "venv"), ["/srv/venv\n", "venv"], True),
    ("keep", (*REPO, "python", "keep", 0), ["--index-url=http://evil", "torch\n"], True),
    ("secret src", (*SECRET, "src"), ["~/.netrc\n", ""], True),
    ("secret dest", (*SECRET, "dest"), ["/root/.netrc\n", "/root/../etc/passwd"], True),
    ("secret mode", (*SECRET, "mode"), ["0600\n", "0600 /etc/shadow", 600], True),
    ("secret owner", (*SECRET, "owner"), ["root\n", "root:root\n", "-R"], True),
    ("disk_free_min", (*SPEC, "checks", "disk_free_min"), ["50g\n"], True),
    ("inodes_free_min_pct", (*SPEC, "checks", "inodes_free_min_pct"),
     [math.nan, math.inf], False),
]  # fmt: skip
CASES = [(name, path, value, plain) for name, path, values, plain in FIELDS for value in values]


def _replace(path: tuple[Any, ...], value: Any) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """BASE with the value (or key) at `path` replaced; the key path a problem should name."""
    doc = copy.deepcopy(BASE)
    *parents, last = path
    node = doc
    for step in parents:
        node = node[step]
    if last is KEY_OF:
        old = next(iter(node))
        node[value] = node.pop(old)
        if parents == ["groups"]:
            doc["hosts"]["a"]["groups"] = [value]
        return doc, (*parents, value)
    node[last] = value
    return doc, path


def _yaml(doc: dict[str, Any]) -> str:
    """The document as YAML: JSON is YAML, but for the spelling of non-finite floats."""
    text = json.dumps(doc, indent=1)
    return text.replace("NaN", ".nan").replace("Infinity", ".inf")


def test_base_inventory_is_valid(tmp_path: Path) -> None:
    """Control for the cases below: each of them changes one value of this valid inventory."""
    path = tmp_path / "base.yaml"
    path.write_text(_yaml(BASE), encoding="utf-8")
    assert [h.name for h in load_inventory([path]).hosts] == ["a"]
    assert list(Draft202012Validator(schema()).iter_errors(BASE)) == []


@pytest.mark.parametrize(
    ("name", "path", "value", "plain"), CASES, ids=[f"{c[0]}:{c[2]!r}" for c in CASES]
)
def test_hostile_value_is_refused_naming_its_key(
    faults: Any, tmp_path: Path, name: str, path: tuple[Any, ...], value: Any, plain: bool
) -> None:
    doc, where = _replace(path, value)
    file = tmp_path / "fleet.yaml"
    file.write_text(_yaml(doc), encoding="utf-8")
    error = faults.attempt(f"{name}={value!r}", lambda: load_inventory([file]), InventoryError)
    assert isinstance(error, InventoryError), f"{value!r} was accepted as {name}"
    messages = [str(p) for p in error.problems]
    shown = re.escape(f"{format_path(where)}: ")
    assert any(re.match(rf"{re.escape(str(file))}:\d+: {shown}\S", m) for m in messages), messages
    if plain:  # what an editor using the schema file says too
        assert list(Draft202012Validator(schema()).iter_errors(_plain_json(doc)))


def _plain_json(doc: dict[str, Any]) -> Any:
    """The document as a JSON editor sees it (22.0 and 22 are the same number there)."""
    return json.loads(json.dumps(doc))


def test_every_string_in_the_schema_has_an_anchored_pattern() -> None:
    """Each string that may reach a command or a file is constrained, and no pattern lets a
    trailing newline through (jsonschema's re.search treats `$` as end-or-before-newline)."""
    found = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if node.get("type") == "string" and "enum" not in node:
                found.append(where)
                pattern = node.get("pattern", "")
                assert pattern.startswith("^") and pattern.endswith("$(?!\\n)"), where
                assert "x-expected" in node, where
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}/{index}")

    walk(schema(), "#")
    assert len(found) >= 25  # every string-valued def and property, keys included


def test_schema_character_classes_refuse_every_unsafe_character() -> None:
    """The free-text patterns spell textsafe.UNSAFE out; they must refuse each such character."""
    defs = schema()["$defs"]
    samples = [chr(c) for c in range(0x110000) if UNSAFE.fullmatch(chr(c))]
    for name, allowed in (("localPath", ""), ("text", "\t\n"), ("absolutePath", "")):
        pattern = re.compile(defs[name]["pattern"])
        for char in samples:
            if char not in allowed:
                assert not pattern.search(f"/a{char}b"), (name, char)
        assert pattern.search("/a b")


def _bomb() -> str:
    """Billion laughs: nine levels of nine aliases, 9**9 strings once expanded, in 500 bytes."""
    lines = ["version: 1", 'x0: &x0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"x{i}: &x{i} [{','.join([f'*x{i - 1}'] * 9)}]" for i in range(1, 9)]
    return "\n".join([*lines, "hosts: {a: {address: 203.0.113.1}}", ""])


def _write(text: str | bytes) -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        path = tmp_path / "hostile.yaml"
        if isinstance(text, str):
            path.write_text(text, encoding="utf-8")
        else:
            path.write_bytes(text)
        return path

    return make


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo.yaml"
    os.mkfifo(path)
    return path


VALID_HEAD = "version: 1\nhosts: {a: {address: 203.0.113.1}}\n"
# (name, how to make the file, the line the problem should name or None, message fragment)
FILES: list[tuple[str, Callable[[Path], Path], int | None, str]] = [
    ("alias bomb", _write(_bomb()), 6, "values written to more than"),
    ("recursive alias", _write("version: 1\nhosts: &h {a: *h}\n"), 2, "containing it"),
    ("merge key bomb", _write(_bomb().replace("x8: &x8 [*x7", "x8: &x8 {a: *x7, b: *x7}, z: [*x7")),
     6, "values written to more than"),
    ("deep flow nesting", _write("version: 1\nhosts: " + "[" * 100_000 + "]" * 100_000), 2,
     f"deeper than {MAX_DEPTH}"),
    ("deep block nesting",
     _write("version: 1\nhosts:\n" + "".join(" " * i + f"k{i}:\n" for i in range(1, 200))),
     None, f"deeper than {MAX_DEPTH}"),
    ("deep block sequence", _write("version: 1\nhosts:\n" + "- " * 5000 + "x\n"), 3,
     f"deeper than {MAX_DEPTH}"),
    ("NUL byte", _write(VALID_HEAD + "# a\x00b\n"), 3, "control character \\x00"),
    ("escape in a comment", _write(VALID_HEAD + "# \x1b[2J\n"), 3, "control character \\x1b"),
    ("bidi override", _write(VALID_HEAD + "# \u202eevil\n"), 3, "control character \\u202e"),
    ("C1 control", _write(VALID_HEAD + "# \x85\n"), 3, "control character \\x85"),
    ("bidi mark", _write(VALID_HEAD + "x: a\u200fb\n"), 3, "control character \\u200f"),
    ("zero-width space", _write(VALID_HEAD + "# a\u200bb\n"), 3, "control character \\u200b"),
    ("byte order mark inside", _write(VALID_HEAD + "\ufeffx: 1\n"), 3,
     "control character \\ufeff"),
    ("5000-digit integer", _write(VALID_HEAD + "x: " + "9" * 5000 + "\n"), 3, "too long"),
    ("5000-digit tagged integer", _write(VALID_HEAD + 'x: !!int "' + "9" * 5000 + '"\n'), 3,
     "too long"),
    ("not UTF-8", _write(b"version: 1\n\xff\xfe\n"), 2, "not UTF-8"),
    ("over the size cap", _write(VALID_HEAD + "#" * MAX_BYTES + "\n"), None, "larger than"),
    ("FIFO", _fifo, None, "not a regular file (a FIFO)"),
    ("/dev/zero", lambda _: Path("/dev/zero"), None, "not a regular file (a character device)"),
    ("directory", lambda tmp_path: tmp_path, None, "not a regular file (a directory)"),
    ("python object tag",
     _write('version: 1\nhosts: {a: {address: !!python/object/apply:os.system ["true"]}}\n'),
     2, "expected an IP address or a host name; got a list"),
    ("mapping as key", _write("version: 1\nhosts: {a: {address: x}}\n? {a: 1}\n: 2\n"), None,
     "unknown key"),
    ("two documents", _write(VALID_HEAD + "---\n" + VALID_HEAD), 3, "YAML syntax error"),
    ("undefined alias", _write("version: 1\nhosts: *nope\n"), 2, "YAML syntax error"),
    ("tab indentation", _write("version: 1\nhosts:\n\ta: {address: x}\n"), 3,
     "YAML syntax error"),
    ("empty file", _write(""), None, "expected a mapping"),
]  # fmt: skip


@pytest.fixture(params=["libyaml", "pure Python"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test that takes it runs on libyaml's parser and again on PyYAML's pure-Python one
    (what a PyYAML built without libyaml has)."""
    if request.param == "pure Python":
        monkeypatch.setattr(safe_yaml, "FAST_PARSER", None)
    else:
        assert safe_yaml.FAST_PARSER is not None, "this PyYAML has no libyaml"
    return request.param


@pytest.mark.parametrize(("name", "make", "line", "fragment"), FILES, ids=[f[0] for f in FILES])
def test_hostile_file_is_refused_within_a_second(
    faults: Any, tmp_path: Path, parser: str, name: str, make: Callable[[Path], Path],
    line: int | None, fragment: str,
) -> None:  # fmt: skip
    name = f"{name} ({parser})"
    path = make(tmp_path)
    error = faults.attempt(name, lambda: load_inventory([path]), InventoryError)
    assert isinstance(error, InventoryError), f"{name} was accepted"
    assert faults.refusal_times[name] < REFUSAL_SECONDS, faults.refusal_times[name]
    [problem] = error.problems
    assert problem.file == str(path)
    assert fragment in problem.message, problem
    if line is not None:
        assert problem.line == line, problem


# The files refused before their content is judged: a spec file (drift --local) reads as they do.
SPEC_FILES = [f for f in FILES if f[0] not in ("python object tag", "mapping as key")]


@pytest.mark.parametrize(
    ("name", "make", "line", "fragment"), SPEC_FILES, ids=[f[0] for f in SPEC_FILES]
)
def test_hostile_spec_file_is_refused_within_a_second(
    faults: Any, tmp_path: Path, parser: str, name: str, make: Callable[[Path], Path],
    line: int | None, fragment: str,
) -> None:  # fmt: skip
    name = f"{name} ({parser})"
    path = make(tmp_path)
    error = faults.attempt(f"spec {name}", lambda: load_spec_file(path, "here"), InventoryError)
    assert isinstance(error, InventoryError), f"{name} was accepted"
    assert faults.refusal_times[f"spec {name}"] < REFUSAL_SECONDS
    [problem] = error.problems
    assert (problem.file, fragment in problem.message) == (str(path), True), problem
    if line is not None:
        assert problem.line == line, problem


def test_validate_exits_2_listing_every_hostile_file(faults: Any, tmp_path: Path) -> None:
    bomb, fifo = _write(_bomb())(tmp_path), _fifo(tmp_path)
    faults.tried += 1
    result = CliRunner().invoke(main, ["validate", str(bomb), str(fifo), "/dev/zero"])
    assert isinstance(result.exception, SystemExit) and result.exit_code == 2, result.output
    faults.refused += 1
    assert result.output.splitlines() == [
        f"{bomb}:6: aliases expand the 22 values written to more than 20022",
        f"{fifo}: cannot read: not a regular file (a FIFO)",
        "/dev/zero: cannot read: not a regular file (a character device)",
    ]


def test_alias_bomb_is_the_classic_size() -> None:
    """The payload is the brief's: at most 500 bytes for 9**9 (387 million) strings."""
    text = _bomb()
    assert len(text.encode()) <= 500
    assert text.count("*x") == 8 * 9 and text.count('"lol"') == 9


def test_aliases_within_bounds_still_work(tmp_path: Path) -> None:
    """Anchors and merge keys an inventory really uses are not refused by the bounds."""
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "version: 1\nhosts:\n"
        "  a: {address: 203.0.113.1, ssh: &ssh {user: root, port: 2222}}\n"
        "  b: {address: 203.0.113.2, ssh: {<<: *ssh, port: 2223}}\n"
        "  c: {address: 203.0.113.3, ssh: *ssh}\n",
        encoding="utf-8",
    )
    hosts = load_inventory([path]).hosts
    assert [(h.ssh.user, h.ssh.port) for h in hosts] == [("root", 2222), ("root", 2223),
                                                          ("root", 2222)]  # fmt: skip


def _amplified(written: int, aliases: int) -> str:
    """`written` plain values, a block of 100 behind an anchor, and `aliases` aliases of it:
    107 + `written` values written, each alias adding 101."""
    return (f"plain: [{'1,' * written}]\nblock: &b [{'1,' * 100}]\n"
            f"uses: [{'*b,' * aliases}]\n")  # fmt: skip


def _roundtrip(text: str) -> tuple[Any, Bounds]:
    yaml = bounded_yaml()
    return load(text, yaml), yaml.composer.bounds


# Every loader under the bounds: validation's, on libyaml and on PyYAML's pure Python, and pin's.
LOADERS: dict[str, Callable[[str], tuple[Any, Bounds]]] = {
    "libyaml": lambda text: (lambda p: (p.data, p.bounds))(parse(text)),
    "pure Python": lambda text: (lambda p: (p.data, p.bounds))(parse(text, fast=False)),
    "round trip": _roundtrip,
}


@pytest.mark.parametrize("loader", LOADERS.values(), ids=LOADERS.keys())
def test_aliases_may_add_ten_values_for_each_written(
    loader: Callable[[str], tuple[Any, Bounds]],
) -> None:
    """The bound on aliases grows with what the document writes, and holds once past it."""
    document, bounds = loader(_amplified(3000, 300))  # adds 30,300 to 3,107 written
    assert len(document["uses"]) == 300 and bounds.expanded == 3107 + 300 * 101
    for written, aliases, bound in [(1000, 300, 1107 + 20_000), (3000, 320, 3107 * 11)]:
        with pytest.raises(YamlRefused, match=f"expand the {written + 107} values written to "
                           f"more than {bound}$") as refused:  # fmt: skip
            loader(_amplified(written, aliases))
        assert refused.value.line == 3


@pytest.mark.parametrize("loader", LOADERS.values(), ids=LOADERS.keys())
def test_values_written_are_bounded_by_count(
    monkeypatch: pytest.MonkeyPatch, loader: Callable[[str], tuple[Any, Bounds]]
) -> None:
    """A file at the size limit could write millions of values; past MAX_WRITTEN (half a
    million) it is refused, shown here with a bound of 1,000."""
    monkeypatch.setattr(safe_yaml, "MAX_WRITTEN", 1000)
    assert len(loader(_amplified(800, 0))[0]["plain"]) == 800  # 907 written
    with pytest.raises(YamlRefused, match="more than 1000 values written") as refused:
        loader(_amplified(1000, 0))
    assert refused.value.line == 1


def test_a_plainly_written_fleet_of_5000_hosts_is_valid(tmp_path: Path) -> None:
    """180,000 values written out (nine times what aliases alone may add), no alias among them:
    what is written is bounded by the file's size, not by the alias bound."""
    path = tmp_path / "fleet.yaml"
    path.write_text(fleet_inventory(5000), encoding="utf-8")
    (tmp_path / ".ssh").mkdir()
    key = tmp_path / ".ssh" / "gpurig-sandbox"  # its ~/ key, shaped as one (validate warns else)
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n-----END OPENSSH PRIVATE KEY-----\n")
    key.chmod(0o600)
    start = time.perf_counter()
    result = CliRunner().invoke(main, ["validate", str(path)], env={"HOME": str(tmp_path)})
    print(f"validate of 5000 hosts ({path.stat().st_size} bytes): "
          f"{time.perf_counter() - start:.1f} s")  # fmt: skip
    assert (result.exit_code, result.output) == (0, "OK: 5000 hosts\n")


def test_pyinfra_inventory_refuses_hostile_files_before_connecting(
    faults: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path pyinfra takes (inventory.py -> load_groups), in process and as pyinfra runs it."""
    bomb = _write(_bomb())(tmp_path)
    fifo = _fifo(tmp_path)
    monkeypatch.setenv("GPURIG_INVENTORY", os.pathsep.join([str(bomb), str(fifo)]))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    error = faults.attempt("pyinfra groups", lambda: load_groups(ROOT), InventoryError)
    assert isinstance(error, InventoryError)
    assert [p.file for p in error.problems] == [str(bomb), str(fifo)]
    result = subprocess.run(
        [PYINFRA, "-y", "inventory.py", "exec", "--", "true"],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert f"{bomb}:6: aliases expand" in result.stderr and f"{fifo}: cannot read" in result.stderr
    assert "Traceback" not in output and "Connecting to hosts" not in output


# YAML that `gpurig pin` reads before validate ever sees it: (name, text, exit code).
PIN_FILES = [
    ("alias bomb", _bomb(), 2),
    ("deep nesting", "a: " + "[" * 10_000, 2),
    ("NUL", "a: 1\n\x00\n", 2),
    ("syntax error", "a: [1\n", 2),
    ("huge integer", "a: " + "1" * 5000 + "\n", 2),
    ("a list", "- a\n", 0),
    ("empty", "", 0),
    ("hosts as a list", "version: 1\nhosts: [1, 2]\n", 0),
    ("odd shapes", "defaults: {spec: {insecure_registries: [{a: 1}], containers: [x]}}\n"
     "groups: {g: 1}\nhosts: {a: {spec: {containers: {c: {image: 5}}}}}\n", 0),
]  # fmt: skip


@pytest.mark.parametrize(("name", "text", "code"), PIN_FILES, ids=[p[0] for p in PIN_FILES])
@pytest.mark.parametrize("check", [False, True], ids=["pin", "check"])
def test_pin_refuses_bad_yaml_with_a_message(
    faults: Any, tmp_path: Path, name: str, text: str, code: int, check: bool
) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(text, encoding="utf-8")
    faults.tried += 1
    result = CliRunner().invoke(main, ["pin", *(["--check"] if check else []), str(path)])
    if not isinstance(result.exception, SystemExit | type(None)):
        faults.tracebacks += 1
        raise AssertionError(f"pin crashed on {name}") from result.exception
    assert result.exit_code == code, result.output
    if code == 2:
        faults.refused += 1
        assert re.match(rf"{re.escape(str(path))}(:\d+)?: \S", result.output), result.output
    assert path.read_text(encoding="utf-8") == text


def test_pin_refuses_a_fifo_without_blocking(faults: Any, tmp_path: Path) -> None:
    fifo = _fifo(tmp_path)
    error = faults.attempt("pin FIFO", lambda: main(["pin", str(fifo)], standalone_mode=False),
                           SystemExit)  # fmt: skip
    assert isinstance(error, SystemExit) and error.code == 2
    assert faults.refusal_times["pin FIFO"] < REFUSAL_SECONDS
    error = faults.attempt("pin_text bomb", lambda: pin_text(_bomb(), "x.yaml"), PinInputError)
    assert str(error).startswith("x.yaml:6: aliases expand")


# Host output that tries to pass for something else in a report.
PAYLOADS = {
    "clear screen": "\x1b[2J\x1b[Hall clean",
    "OSC 8 hyperlink": "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "carriage return": "real problem\rall clean   ",
    "fake line": "x\nb100  ok",
    "bell and backspace": "a\x07\x08b",
    "NUL": "a\x00b",
    "DEL and CSI": "a\x7f\x9b2Jb",
    "vertical tab and form feed": "a\x0b\x0cb",
    "bidi override": "abc\u202edcba",
    "C1 NEL and CSI": "a\x85\x9b2Jb",
    "bidi marks": "a\u200fb\u200ec\u061cd",
    "bidi isolates": "\u2067abc\u2069\u2066d\u2068",
    "zero width, soft hyphen, BOM": "a\u200bb\u200dc\u00add\ufeffe\u2060f",
    "tag characters": "ok\U000e0001\U000e0041\U000e007f",
    "line separator": "a\u2028b",
    "lone surrogate": "a\udcffb",
    "noncharacter": "a\uffffb",
    "HTML": '<img src=x onerror="alert(1)">&amp;',
    "Markdown link": "[all clean](https://evil.example) ![x](https://evil.example/x.png)",
    "pipes": "a | b | c",
    "backticks": "`a` ``b``",
    "heading": "\n# all clean",
}


def _hostile_report(payload: str) -> list[HostReport]:
    """A finding whose every text is the payload (its subject and a field's values too), and a
    warning quoting it."""
    finding = Finding(
        f"repo.{payload}",
        "error",
        payload,
        payload,
        payload,
        payload,
        subject=payload,
        differences=(Difference(payload, payload, payload),),
    )
    warning = Finding("repo.dirty", "warn", payload, "clean", payload, "commit")
    return [HostReport("a100-1", True, [finding, warning]), HostReport(payload, False, [])]


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_table_shows_control_characters_escaped(faults: Any, payload: str) -> None:
    for colour in (False, True):
        text = to_table(_hostile_report(payload), colour=colour)
        faults.rendered += 1
        own = re.sub(r"\x1b\[[0-9;]*m", "", text) if colour else text  # the table's own colours
        assert not UNSAFE.search(own.replace("\n", "")), repr(own)
        # headline, message, field header and row, fix; headline, message, values, fix; one
        # clean host; the total; the hint naming `gpurig explain`
        assert own.count("\n") == 5 + 4 + 1 + 1 + 1
        assert visible(payload) in own


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_markdown_escapes_html_links_and_cells(faults: Any, payload: str) -> None:
    text = to_markdown(_hostile_report(payload))
    faults.rendered += 1
    assert not UNSAFE.search(text.replace("\n", ""))
    assert "<" not in text and ">" not in text
    assert "](" not in text.replace("\\](", "")
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert len(rows) == 2 + 2  # header, rule, two findings
    for row in rows:  # seven unescaped pipes: six cells, nothing split or joined
        assert len(re.findall(r"(?<!\\)\|", row)) == 7, row
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert len(headings) == 2  # the verdict and one host with findings: none forged


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_junit_parses_and_round_trips_the_visible_text(faults: Any, payload: str) -> None:
    text = to_junit(_hostile_report(payload))
    faults.rendered += 1
    suite = ET.fromstring(text.encode("utf-8"))
    shown = visible(payload, keep="\t\n")
    failure = suite.find("testcase/failure")
    assert failure is not None
    assert failure.get("message") == f"{shown}: the converge cannot fix it (repo.{shown})"
    assert failure.get("type") == f"repo.{shown}"
    assert failure.text == f"{shown}\n{shown}: expected {shown}; found {shown}\nfix: {shown}"
    warning = f"host: the converge cannot fix it (repo.dirty): {shown}"
    assert suite.findtext("testcase/system-out") == warning
    assert [c.get("name") for c in suite.findall("testcase")] == ["a100-1", shown]


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_json_round_trips_exactly(faults: Any, payload: str) -> None:
    text = to_json(_hostile_report(payload))
    faults.rendered += 1
    assert text.isascii() and not UNSAFE.search(text.replace("\n", ""))
    doc = json.loads(text)
    assert doc["hosts"][0]["findings"][0]["actual"] == payload
    assert doc["hosts"][1]["name"] == payload


def _hostile_fleet(payload: str) -> list[HostReport]:
    """Three reachable hosts whose fleet facts quote the host (driver, kernel, image names)."""
    facts = [{"driver": payload, "kernel": "6.1", "image": {payload: payload}},
             {"driver": "570.1", "kernel": payload, "image": {payload: "sha256:1"}},
             {"driver": "570.1", "kernel": "6.1", "image": {"train": payload}}]  # fmt: skip
    return [HostReport(f"h{i}", True, [], f) for i, f in enumerate(facts)]


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_the_fleet_view_shows_host_text_escaped_in_every_format(faults: Any, payload: str):
    """The fleet view once escaped only C0 and DEL: C1, bidi and format characters from a
    host reached the terminal and the job summary as themselves."""
    reports = _hostile_fleet(payload)
    for fmt in ("table", "markdown", "json", "junit"):
        text = render(reports, fmt)
        faults.rendered += 1
        assert not UNSAFE.search(text.replace("\n", "")), (fmt, text)
    table = render(reports, "table")
    assert "fleet:" in table and visible(payload) in table
    assert "### Fleet" in render(reports, "markdown")
    assert json.loads(render(reports, "json"))["fleet"]["groups"][0]["value"] in (payload, "570.1")


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_onboard_preflight_lines_show_control_characters_escaped(faults: Any, payload: str):
    text = render_checks([Check("gpu", "ok", payload), Check("os", "FAIL", payload)])
    faults.rendered += 1
    assert not UNSAFE.search(text.replace("\n", ""))
    assert text.count("\n") == 2 and visible(payload) in text


def test_a_byte_order_mark_first_is_not_text(tmp_path: Path) -> None:
    """Editors that save UTF-8 with a BOM: the file loads (U+FEFF anywhere else is refused)."""
    path = tmp_path / "bom.yaml"
    path.write_bytes("\ufeff".encode() + VALID_HEAD.encode())
    assert [h.name for h in load_inventory([path]).hosts] == ["a"]


def test_yaml_value_spelling_control() -> None:
    """The inventories above are read as YAML: escapes in them arrive as the characters."""
    assert YAML(typ="safe").load(_yaml({"x": "a\x1b\n", "y": math.nan}))["x"] == "a\x1b\n"


def test_unsafe_holds_every_control_format_and_separator_character_unicode_knows() -> None:
    """textsafe spells its class out; this keeps it equal to what unicodedata calls Cc, Cf, Zl,
    Zp and Cs (a newer Unicode adding a format character fails here, not in a report)."""
    import unicodedata

    kinds = {"Cc", "Cf", "Zl", "Zp", "Cs"}
    chars = (chr(c) for c in range(0x110000))
    missing = [c for c in chars if unicodedata.category(c) in kinds and not UNSAFE.fullmatch(c)]
    assert missing == []
    assert visible("\U000e0041") == "\\U000e0041" and visible("\u200f") == "\\u200f"


@pytest.mark.parametrize("keep", ["", "\n", "\t\n\r"])
def test_ascii_text_finds_what_the_pattern_finds(keep: str) -> None:
    """Printable ASCII skips the pattern (a node contract's start does not compile it): every
    ASCII character, alone and in a line, is escaped or kept as the pattern alone would."""
    from gpurig.spec.textsafe import escape_char, first_unsafe

    for code in range(0x80):
        for text in (chr(code), f"gpu 0 {chr(code)} ok"):
            expected = UNSAFE.sub(lambda m: m[0] if m[0] in keep else escape_char(m[0]), text)
            assert visible(text, keep) == expected
            found = next((m for m in UNSAFE.finditer(text) if m[0] not in keep), None)
            assert (first_unsafe(text, keep) or [None])[0] == (found or [None])[0]
