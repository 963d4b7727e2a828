"""The `gpu_expect` spec key: accepted beside `gpu: auto|required|absent`, refused if malformed."""

from __future__ import annotations

import pytest

from gpurig.inventory import InventoryError, load_inventory_text

BASE = """\
version: 1
hosts:
  h100-1:
    address: 203.0.113.10
    spec:
      gpu: required
      gpu_expect: {expect}
"""


def test_gpu_expect_is_carried_into_the_host_spec() -> None:
    text = BASE.format(expect='{count: 8, model: "H100 80GB HBM3", mig: disabled}')
    (host,) = load_inventory_text(text, "fleet.yaml").hosts
    assert host.spec["gpu"] == "required"
    assert host.spec["gpu_expect"] == {"count": 8, "model": "H100 80GB HBM3", "mig": "disabled"}


@pytest.mark.parametrize(
    ("expect", "words"),
    [
        ("{count: 0}", "gpu_expect.count"),
        ("{count: eight}", "gpu_expect.count"),
        ("{mig: on}", "gpu_expect.mig"),
        ("{model: H100, size: big}", "gpu_expect"),
    ],
)
def test_malformed_gpu_expect_is_refused_with_its_key(expect: str, words: str) -> None:
    with pytest.raises(InventoryError) as err:
        load_inventory_text(BASE.format(expect=expect), "fleet.yaml")
    assert words in str(err.value)
