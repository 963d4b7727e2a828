"""The schema's verdict on a node's spec file is remembered by content (gpurig.spec.valid_cache),
only where this account alone can change the record, and never for a text that failed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpurig.spec import valid_cache
from gpurig.spec.inventory import InventoryError, load_spec_file

SCHEMA = b'{"type": "object"}'


@pytest.fixture
def cache(private_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    place = private_dir / "valid-specs"
    monkeypatch.setattr(valid_cache, "cache_dir", lambda: place)
    return place


def test_a_text_that_passed_is_known_and_any_change_is_not(cache: Path) -> None:
    assert not valid_cache.validated_before(SCHEMA, "engine: none\n")
    valid_cache.remember_valid(SCHEMA, "engine: none\n")
    assert valid_cache.validated_before(SCHEMA, "engine: none\n")
    assert not valid_cache.validated_before(SCHEMA, "engine: docker\n")
    assert not valid_cache.validated_before(b'{"type": "array"}', "engine: none\n")
    assert (cache.stat().st_mode & 0o777, len(list(cache.iterdir()))) == (0o700, 1)


@pytest.mark.parametrize("mode", [0o770, 0o707])
def test_a_record_others_could_write_is_not_trusted(cache: Path, mode: int) -> None:
    valid_cache.remember_valid(SCHEMA, "engine: none\n")
    cache.chmod(mode)
    assert not valid_cache.validated_before(SCHEMA, "engine: none\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the record another owner")
def test_a_record_another_account_owns_is_not_trusted(cache: Path) -> None:
    valid_cache.remember_valid(SCHEMA, "engine: none\n")
    os.chown(cache, 65534, 65534)
    assert not valid_cache.validated_before(SCHEMA, "engine: none\n")


def test_an_invalid_spec_is_refused_every_time_and_never_remembered(
    cache: Path, tmp_path: Path
) -> None:
    spec = tmp_path / "node.yaml"
    spec.write_text("engine: none\nshm_size: 512\n")  # a size without its unit
    for _ in range(2):
        with pytest.raises(InventoryError, match="shm_size"):
            load_spec_file(spec, "node")
    assert not cache.exists() or list(cache.iterdir()) == []
    spec.write_text("engine: none\n")
    load_spec_file(spec, "node")
    assert len(list(cache.iterdir())) == 1
