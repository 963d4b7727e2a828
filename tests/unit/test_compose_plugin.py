"""The compose plugin: its plan, and its install command run here for real (curl from a
file:// URL into a temporary directory): only a download with the declared sha256 lands."""

from __future__ import annotations

import copy
import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
from test_plans import converged, reader

from gpurig.deploys.compose import fetch_plugin
from gpurig.plans import compose, plan_host
from gpurig.spec.model import normalise


def test_the_default_url_is_docker_s_release_asset_for_the_version():
    spec = normalise({"compose": {"version": "2.29.7", "sha256": "a" * 64}})
    assert spec["compose"]["url"] == (
        "https://github.com/docker/compose/releases/download/v2.29.7/docker-compose-linux-x86_64"
    )
    mirror = {"version": "2.29.7", "sha256": "a" * 64, "url": "https://mirror/compose"}
    assert normalise({"compose": mirror})["compose"] == mirror


@pytest.mark.parametrize(
    ("seen", "actual"),
    [(None, "missing"),
     ({"sha256": "e" * 64, "mode": "755"}, "another build (sha256 eeeeeeeeeeee...)"),
     ({"sha256": "d" * 64, "mode": "644"}, "mode 644")],
)  # fmt: skip
def test_missing_another_build_or_mode_is_a_change(seen: dict | None, actual: str):
    state = copy.deepcopy(converged("docker"))
    state["files"][compose.PLUGIN] = seen and {**seen, "owner": "root"}
    [change] = plan_host(state["spec"], reader(state))
    assert (change.id, change.actual) == ("compose.plugin", actual)
    assert change.data["url"].endswith("/v2.29.7/docker-compose-linux-x86_64")


def test_curl_is_asked_for_only_when_there_is_something_to_download():
    state = copy.deepcopy(converged("docker"))
    state["packages"]["curl"]["version"] = None
    assert compose.plan(state["spec"], reader(state)) == []  # in place: nothing to download
    state["files"][compose.PLUGIN] = None
    ids = [c.id for c in compose.plan(state["spec"], reader(state))]
    assert ids == ["packages.missing", "compose.plugin"]


@pytest.mark.skipif(not shutil.which("curl"), reason="needs curl")
def test_only_a_download_with_the_declared_sha256_lands(tmp_path: Path):
    release = tmp_path / "docker-compose-linux-x86_64"
    release.write_bytes(b"#!/bin/sh\necho 'Docker Compose version v2.29.7'\n")
    good = hashlib.sha256(release.read_bytes()).hexdigest()
    path = tmp_path / "cli-plugins" / "docker-compose"
    url = release.as_uri()
    bad = subprocess.run(["sh", "-c", fetch_plugin(url, "0" * 64, str(path))],
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode != 0 and not path.exists()
    assert not list(tmp_path.glob("cli-plugins/*"))  # nothing half-written either
    subprocess.run(["sh", "-c", fetch_plugin(url, good, str(path))], check=True)
    assert path.read_bytes() == release.read_bytes() and path.stat().st_mode & 0o777 == 0o755
    release.write_bytes(b"tampered")
    subprocess.run(["sh", "-c", fetch_plugin(url, good, str(path))], capture_output=True)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == good  # the installed one kept
