"""The Docker Compose v2 CLI plugin (`compose: {version, sha256, url}`), for Docker hosts that
run sandboxes through `docker compose`: Docker's release binary at the declared version, put
where the docker CLI looks for plugins only after its sha256 matched the declared one. The
inventory carries the checksum, so a changed or tampered download never lands, whatever the
distribution packages (Debian's docker.io has no compose v2 plugin)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpurig.facts.gpurig_files import FileDigests
from gpurig.plans.change import Change
from gpurig.plans.packages import missing

# The first of the docker CLI's system plugin directories (docker/cli, cli-plugins/manager).
PLUGIN = "/usr/local/lib/docker/cli-plugins/docker-compose"
TOOLS = ["ca-certificates", "curl"]


def plan(spec: Mapping[str, Any], read: Callable[..., Any]) -> list[Change]:
    compose = spec.get("compose")
    if not compose:
        return []
    found = read(FileDigests, paths=[PLUGIN]).get(PLUGIN)
    tools = missing(TOOLS, read, "to download the compose plugin")
    if found is None:
        actual = "missing"
    elif found["sha256"] != compose["sha256"]:
        actual = f"another build (sha256 {found['sha256'][:12]}...)"
    elif int(found["mode"], 8) != 0o755:
        actual = f"mode {found['mode']}"
    else:
        return []  # curl is needed only to download
    return [
        *tools,
        Change(
            "compose.plugin",
            PLUGIN,
            f"docker compose {compose['version']} (sha256 {compose['sha256'][:12]}...), mode 755",
            actual,
            f"download {compose['url']}, check its sha256 and install it",
            data=dict(compose),
        ),
    ]
