"""The data tables' kept copies (gpurig/data/tables.py): the same data as the YAML, used only
when no one but the table's owner may change them, renewed when the YAML changes."""

from __future__ import annotations

import marshal
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpurig.data import tables

DATA = Path(tables.__file__).parent
NAMES = sorted(path.name for path in DATA.glob("*.yaml"))


@pytest.fixture
def copied(tmp_path: Path) -> Path:
    for name in NAMES:
        shutil.copy(DATA / name, tmp_path / name)
    return tmp_path


def test_every_table_reads_the_same_from_its_copy_and_from_its_yaml(copied: Path) -> None:
    cache = copied / "__pycache__"
    for name in NAMES:
        expected = yaml.safe_load((copied / name).read_text())
        assert tables.load(copied / name, cache) == expected  # parsed, then kept
        [copy] = cache.glob(f"{name}.*")
        assert marshal.loads(copy.read_bytes()) == expected
        assert tables.load(copied / name, cache) == expected  # from the copy


def test_a_node_contract_reading_the_copies_loads_no_yaml(copied: Path) -> None:
    """In a fresh interpreter, with every copy kept: no PyYAML at all."""
    cache = copied / "__pycache__"
    for name in NAMES:
        tables.load(copied / name, cache)
    code = (
        "import sys; from pathlib import Path; from gpurig.data.tables import load\n"
        f"[load(Path({str(copied)!r}, n), Path({str(cache)!r})) for n in {NAMES!r}]\n"
        "print('yaml' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_copy_another_account_may_change_is_not_read(copied: Path) -> None:
    cache, name = copied / "__pycache__", "node_modes.yaml"
    truth = tables.load(copied / name, cache)
    [copy] = cache.glob(f"{name}.*")
    copy.write_bytes(marshal.dumps({"modes": {}}))
    copy.chmod(0o666)  # anyone could have written it
    assert tables.load(copied / name, cache) == truth
    copy.chmod(0o644)
    if os.geteuid() == 0:  # a copy owned by another account
        os.chown(copy, 65534, 65534)
        assert tables.load(copied / name, cache) == truth


def test_a_changed_table_gets_a_new_copy_and_the_old_one_goes(copied: Path) -> None:
    cache, source = copied / "__pycache__", copied / "node_modes.yaml"
    tables.load(source, cache)
    [before] = cache.glob("node_modes.yaml.*")
    source.write_text(source.read_text() + "\nextra: 1\n")
    assert tables.load(source, cache)["extra"] == 1
    [after] = cache.glob("node_modes.yaml.*")
    assert after != before and not before.exists()
    # The same size, rewritten at once: a copy is keyed by the file's times, not its length.
    source.write_text(source.read_text().replace("extra: 1", "extra: 2"))
    assert tables.load(source, cache)["extra"] == 2


def test_what_marshal_cannot_hold_is_parsed_each_time(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text("when: 2024-01-02\n1: one\n")
    expected = yaml.safe_load("when: 2024-01-02\n1: one\n")
    assert tables.load(tmp_path / "t.yaml", tmp_path / "c") == expected
    assert not [p for p in (tmp_path / "c").glob("*") if not p.name.endswith(".tmp")]
