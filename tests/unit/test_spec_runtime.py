"""A spec file's parse kept between runs (gpurig/spec/runtime.py, gpurig/data/kept.py): kept
only for a spec that passes, read back only as the account's own, and never in place of what
the spec now says or of an error's line."""

from __future__ import annotations

import marshal
import os
import shutil
from pathlib import Path

import pytest

from gpurig.spec import runtime
from gpurig.spec.inventory import InventoryError, load_spec_file

SPEC = "engine: none\ncore_dumps: disabled\nchecks: {disk_free_min: 1g}\n"


def copies(where: Path) -> list[Path]:
    return sorted(p for p in where.glob("spec.*") if not p.name.endswith(".tmp"))


def test_a_passing_spec_is_kept_and_read_back_the_same(tmp_path: Path, run_dir: Path) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text(SPEC)
    first = load_spec_file(spec, "n")
    [copy] = copies(run_dir)
    key = runtime.named("spec", SPEC)[1]
    data = {"engine": "none", "core_dumps": "disabled", "checks": {"disk_free_min": "1g"}}
    assert marshal.loads(copy.read_bytes()) == (key, data)
    assert run_dir.stat().st_mode & 0o777 == 0o700
    assert load_spec_file(spec, "n") == first
    spec.write_text(SPEC.replace("1g", "2g"))  # a new content: a new parse, the old one kept
    assert load_spec_file(spec, "n").spec["checks"]["disk_free_min"] == "2g"
    assert len(copies(run_dir)) == 2 and copy in copies(run_dir)


def test_the_last_few_specs_are_kept_the_older_go(tmp_path: Path, run_dir: Path) -> None:
    spec = tmp_path / "node.yaml"
    texts = [SPEC.replace("1g", f"{size + 1}g") for size in range(runtime.KEPT_COPIES + 3)]
    for text in texts:
        spec.write_text(text)
        load_spec_file(spec, "n")
        assert runtime.kept_parse(text) is not None
    assert len(copies(run_dir)) == runtime.KEPT_COPIES
    kept = [runtime.kept_parse(text) is not None for text in texts]
    assert kept == [False] * 3 + [True] * runtime.KEPT_COPIES


def test_a_spec_that_fails_is_not_kept_and_says_its_line(tmp_path: Path, run_dir: Path) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text("engine: none\ncore_dumps: sometimes\n")
    with pytest.raises(InventoryError, match=r"node.yaml:2"):
        load_spec_file(spec, "n")
    assert copies(run_dir) == []


def test_a_kept_parse_that_no_longer_passes_is_parsed_again_for_its_lines(
    tmp_path: Path, run_dir: Path
) -> None:
    """A copy whose data fails validation (an older gpurig's, or one changed by its owner) is
    not taken: the file is parsed, and its own problems are said at their lines."""
    spec = tmp_path / "node.yaml"
    spec.write_text(SPEC)
    load_spec_file(spec, "n")
    [copy] = copies(run_dir)
    key = runtime.named("spec", SPEC)[1]
    copy.write_bytes(marshal.dumps((key, {"engine": "none", "core_dumps": "sometimes"})))
    assert load_spec_file(spec, "n").spec["core_dumps"] == "disabled"


def test_a_copy_of_the_same_name_worked_out_from_another_text_is_not_taken(
    tmp_path: Path, run_dir: Path
) -> None:
    """A copy's name is a checksum of what it was worked out from; two texts of one checksum
    (or a copy of an older format) must not hand one's parse to the other: the whole text kept
    in the copy is compared."""
    spec = tmp_path / "node.yaml"
    spec.write_text(SPEC)
    load_spec_file(spec, "n")
    [copy] = copies(run_dir)
    other = SPEC.replace("1g", "9g")
    copy.write_bytes(marshal.dumps((runtime.named("spec", other)[1], {"engine": "none"})))
    assert runtime.kept_parse(SPEC) is None
    assert load_spec_file(spec, "n").spec["checks"]["disk_free_min"] == "1g"
    copy.write_bytes(marshal.dumps({"engine": "none"}))  # a copy without its key
    assert runtime.kept_parse(SPEC) is None


def test_a_copy_another_account_may_write_is_not_read(tmp_path: Path, run_dir: Path) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text(SPEC)
    load_spec_file(spec, "n")
    [copy] = copies(run_dir)
    key = runtime.named("spec", SPEC)[1]
    copy.write_bytes(marshal.dumps((key, {"engine": "none", "core_dumps": "unlimited"})))
    for where in (copy, run_dir):
        where.chmod(where.stat().st_mode | 0o002)
        assert runtime.kept_parse(SPEC) is None
        assert load_spec_file(spec, "n").spec["core_dumps"] == "disabled"
        where.chmod(where.stat().st_mode & ~0o002)
    if os.geteuid() == 0:
        os.chown(copy, 65534, 65534)
        assert runtime.kept_parse(SPEC) is None


def test_no_runtime_directory_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPURIG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert runtime.directory() is None
    spec = tmp_path / "node.yaml"
    spec.write_text(SPEC)
    assert load_spec_file(spec, "n").spec["engine"] == "none"


@pytest.mark.skipif(os.geteuid() != 0, reason="the runtime directory root trusts")
def test_root_takes_a_runtime_directory_only_where_root_alone_can_change_it(
    private_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What root keeps there is run at the next job start (the read started ahead): a
    GPURIG_RUNTIME_DIR another account could re-point or fill is not root's, and nothing is
    kept (nor read) anywhere else instead."""
    theirs = private_dir / "alice"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    (theirs / "run").symlink_to(private_dir / "roots")
    (private_dir / "roots").mkdir()
    (private_dir / "link").symlink_to(private_dir / "roots")
    for where, found in (
        (theirs / "run", None),  # her link to root's own directory
        (theirs / "mine", None),
        (Path("/tmp/gpurig-run"), None),  # anyone could make it first
        (private_dir / "link", str(private_dir / "roots")),  # root's link: the walked path
    ):
        monkeypatch.setenv("GPURIG_RUNTIME_DIR", str(where))
        assert runtime.directory() == found


def test_nothing_is_kept_where_it_would_not_be_read(tmp_path: Path, run_dir: Path) -> None:
    run_dir.mkdir(mode=0o700)
    run_dir.chmod(0o777)
    spec = tmp_path / "node.yaml"
    spec.write_text(SPEC)
    assert load_spec_file(spec, "n").spec["engine"] == "none"
    assert copies(run_dir) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a directory of another account's")
def test_a_job_without_its_runtime_directory_keeps_in_podman_s_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A SLURM job carries the login node's XDG_RUNTIME_DIR to a node that has none: the
    account's copies go to /tmp/podman-run-UID (user scope's runtime directory there), only
    while that directory is the account's own."""
    uid = 64321
    podman = Path(f"/tmp/podman-run-{uid}")
    shutil.rmtree(podman, ignore_errors=True)
    monkeypatch.delenv("GPURIG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", f"/run/user/{uid}/missing")
    monkeypatch.setattr(os, "geteuid", lambda: uid)
    try:
        assert runtime.directory() is None  # not made yet: nothing kept
        podman.mkdir(mode=0o700)
        os.chown(podman, uid, uid)
        assert runtime.directory() == str(podman / "gpurig")
        os.chown(podman, 65534, 65534)  # another account's: not used
        assert runtime.directory() is None
        os.chown(podman, uid, uid)
        podman.chmod(0o777)
        assert runtime.directory() is None
    finally:
        shutil.rmtree(podman, ignore_errors=True)
