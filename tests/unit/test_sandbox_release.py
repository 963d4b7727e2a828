"""Hosts of several Debian releases in one sandbox: each release's rootfs cached apart, each
host's name, address and links its own."""

from __future__ import annotations

import pytest

from gpurig.sandbox import fleet, full, rootfs, users
from gpurig.sandbox.proc import SandboxError
from gpurig.sandbox.state import State


def state() -> State:
    box = State(name="t", slot=3, network="10.103.0.0/17")
    box.hosts = {
        rec.name: rec
        for release in rootfs.RELEASES
        for rec in [full.record(box, 1, release), full.record(box, 2, release)]
    }
    return box


def test_each_release_has_a_cache_key_of_its_own() -> None:
    keys = {rootfs.cache_key(release) for release in rootfs.RELEASES}
    assert len(keys) == len(rootfs.RELEASES)
    # The default release's key is the one its cached rootfs was made under before releases.
    assert rootfs.cache_key("bookworm") == "d55d2b2646cf"
    with pytest.raises(SandboxError, match="unknown release 'buster'"):
        rootfs.cache_key("buster")


def test_fleet_hosts_of_each_release_never_share_a_name_address_or_link() -> None:
    box = state()
    records = [fleet.record(box, i, r) for r in rootfs.RELEASES for i in (1, 2, 1000)]
    for attribute in ("name", "address", "netns", "veth"):
        values = [getattr(rec, attribute) for rec in records]
        assert len(set(values)) == len(values), attribute
    assert all(len(rec.veth) <= 15 for rec in records)
    assert fleet.record(box, 1).name == "fleet-001"
    assert fleet.record(box, 1, "trixie").name == "fleet-trixie-001"


def test_full_hosts_are_named_after_their_release_and_users_live_on_host_1_of_each() -> None:
    box = state()
    assert sorted(box.hosts) == ["full-1", "full-2", "full-bullseye-1", "full-bullseye-2",
                                 "full-trixie-1", "full-trixie-2"]  # fmt: skip
    assert box.releases("full") == sorted(rootfs.RELEASES)
    assert [h.name for h in users.homes(box)] == ["full-bullseye-1", "full-1", "full-trixie-1"]
