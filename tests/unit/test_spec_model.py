"""normalise: the spec with its defaults, sharing nothing mutable with what it was given or
with the defaults themselves (a plan that edits its copy changes no other host's spec)."""

from __future__ import annotations

from gpurig.spec.model import normalise


def test_normalise_shares_nothing_mutable_and_is_idempotent() -> None:
    given = {"engine": "docker", "packages": ["htop"], "cleanup": {"paths": [{"path": "/x"}]}}
    first = normalise(given)
    first["packages"].append("vim")
    first["cleanup"]["paths"][0]["path"] = "/y"
    first["insecure_registries"].append("r:5000")
    first["containers"]["c"] = {}
    assert given == {
        "engine": "docker",
        "packages": ["htop"],
        "cleanup": {"paths": [{"path": "/x"}]},
    }
    second = normalise(given)
    assert second["packages"] == ["htop"] and second["cleanup"]["paths"][0]["path"] == "/x"
    assert second["insecure_registries"] == [] and second["containers"] == {}
    assert normalise(second) == second
