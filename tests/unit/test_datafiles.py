"""The data tables load through libyaml exactly as `yaml.safe_load` reads them."""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from gpurig.data.tables import table

DATA = resources.files("gpurig") / "data"
NAMES = sorted(p.name for p in DATA.iterdir() if p.name.endswith(".yaml"))


def test_every_table_is_covered() -> None:
    assert {"cuda_drivers.yaml", "checks.yaml", "gpu_arch.yaml"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_table_equals_the_pure_safe_loader(name: str) -> None:
    text = (DATA / name).read_text(encoding="utf-8")
    assert table(name) == yaml.safe_load(text)


def test_table_is_parsed_once() -> None:
    assert table("checks.yaml") is table("checks.yaml")
