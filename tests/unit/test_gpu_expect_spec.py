"""The `gpu_expect` spec key: accepted beside `gpu: auto|required|absent`, refused if malformed."""

from __future__ import annotations

import pytest

from gpurig.read import gpu_parse
from gpurig.spec.inventory import InventoryError, load_inventory_text, schema

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
        ("{mig_slices: []}", "gpu_expect.mig_slices: expected a list of {profile, count}"),
        ("{mig_slices: {3g.20gb: 2}}", "gpu_expect.mig_slices: expected a list of {profile"),
        ("{mig_slices: [{profile: 3g.20GB, count: 2}]}",
         "gpu_expect.mig_slices[0].profile: expected a MIG profile as nvidia-smi -L prints it"),
        ("{mig_slices: [{profile: MIG 3g.20gb, count: 2}]}", "mig_slices[0].profile: expected"),
        ("{mig_slices: [{profile: 3g.20gb, count: 0}]}",
         "gpu_expect.mig_slices[0].count: expected the number of slices of this profile"),
        ("{mig_slices: [{profile: 3g.20gb}]}",
         "gpu_expect.mig_slices[0]: missing required key 'count'"),
        ("{mig_slices: [{profile: 3g.20gb, count: 2, gpu: 0}]}",
         "gpu_expect.mig_slices[0].gpu: unknown key 'gpu'; allowed: profile, count"),
        ("{mig: disabled, mig_slices: [{profile: 3g.20gb, count: 2}]}",
         "gpu_expect.mig: expected enabled, or no mig key: mig_slices are declared"),
    ],
)  # fmt: skip
def test_malformed_gpu_expect_is_refused_with_its_key(expect: str, words: str) -> None:
    with pytest.raises(InventoryError) as err:
        load_inventory_text(BASE.format(expect=expect), "fleet.yaml")
    assert words in str(err.value)
    assert str(err.value).startswith("fleet.yaml:7: hosts.h100-1.spec.gpu_expect")


def test_mig_slices_as_the_seed_declares_them() -> None:
    """A100 40GB split into 20 GB slices, two per job (seed 001)."""
    text = BASE.format(expect="{model: A100, mig_slices: [{profile: 3g.20gb, count: 2}]}")
    (host,) = load_inventory_text(text, "fleet.yaml").hosts
    assert host.spec["gpu_expect"]["mig_slices"] == [{"profile": "3g.20gb", "count": 2}]
    # Real profile names: H200 compute-instance profiles (tests/fixtures/gpu), GH200 `mig -lgip`
    # (NVIDIA/mig-parted#139), RTX PRO 6000 Blackwell (bigstack-oss/cubecos#312,
    # NVIDIA/gpu-operator#1573), A100 80GB.
    real = ("1c.3g.71gb", "1g.18gb+me", "1g.24gb+gfx", "1g.24gb+me.all", "1g.24gb-me", "7g.80gb")
    for profile in real:
        slices = f"{{mig: enabled, mig_slices: [{{profile: {profile}, count: 1}}]}}"
        (host,) = load_inventory_text(BASE.format(expect=slices), "fleet.yaml").hosts
        assert host.spec["gpu_expect"]["mig_slices"][0]["profile"] == profile


def test_a_hosts_slices_replace_its_groups() -> None:
    """A list, so a host's layout replaces its group's instead of adding to it."""
    text = """\
version: 1
groups:
  a100-mig: {spec: {gpu_expect: {mig_slices: [{profile: 3g.20gb, count: 2}]}}}
hosts:
  a100-7:
    address: 203.0.113.17
    groups: [a100-mig]
    spec: {gpu_expect: {mig_slices: [{profile: 1g.5gb, count: 7}]}}
"""
    (host,) = load_inventory_text(text, "fleet.yaml").hosts
    assert host.spec["gpu_expect"]["mig_slices"] == [{"profile": "1g.5gb", "count": 7}]


def test_schema_profile_pattern_is_the_parsers() -> None:
    """The schema accepts exactly the profiles gpu_parse reads from nvidia-smi -L."""
    slices = schema()["$defs"]["spec"]["properties"]["gpu_expect"]["properties"]["mig_slices"]
    pattern = slices["items"]["properties"]["profile"]["pattern"]
    assert pattern == f"^{gpu_parse.MIG_PROFILE}$(?!\\n)"
