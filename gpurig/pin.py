"""`gpurig pin`: resolve container images given by tag to their registry digests and rewrite
the inventory in place, comments, order and formatting kept (field notes 003, U30: a tag is
not an image; `:latest` moved under a running fleet).

The inventory is read here with ruamel's round-trip loader, not `load_inventory`: the schema
refuses images without a digest, which is exactly what pin exists to fix, and validating would
also throw away the comments and layout the rewrite must keep. Pin touches only `image` values
under `containers` of defaults, groups and hosts; `gpurig validate` judges the rest.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from gpurig.fsutil import atomic_write

MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
DOCKER_HUB = "registry-1.docker.io"
TIMEOUT = 30  # seconds per HTTP request


class PinError(Exception):
    """A registry could not resolve an image; the message names the image and why."""


@dataclass(frozen=True)
class ImageRef:
    """Where an image lives: registry host[:port], repository path and tag."""

    registry: str
    repository: str
    tag: str

    @classmethod
    def parse(cls, image: str) -> ImageRef:
        """Split `[registry/]name[:tag]` the way docker does (docker.io, library/, latest)."""
        name, tag = image, "latest"
        last = image.rsplit("/", 1)[-1]
        if ":" in last:
            name, tag = image.rsplit(":", 1)
        first, _, rest = name.partition("/")
        if rest and ("." in first or ":" in first or first == "localhost"):
            return cls(first, rest, tag)
        return cls(DOCKER_HUB, name if rest else f"library/{name}", tag)


@dataclass
class Unpinned:
    """An image value without a digest, with where it is in the file."""

    path: tuple[str, ...]
    line: int
    image: str


def _image_slots(doc: Any) -> Iterator[tuple[tuple[str, ...], Any, str]]:
    """(key path, containing mapping, key) for every container image in the document."""
    if not isinstance(doc, dict):
        return
    levels: list[tuple[tuple[str, ...], Any]] = [(("defaults",), doc.get("defaults"))]
    for section in ("groups", "hosts"):
        for name, level in (doc.get(section) or {}).items():
            levels.append(((section, str(name)), level))
    for prefix, level in levels:
        spec = level.get("spec") if isinstance(level, dict) else None
        containers = spec.get("containers") if isinstance(spec, dict) else None
        for cname, container in (containers or {}).items():
            if isinstance(container, dict) and isinstance(container.get("image"), str):
                yield (*prefix, "spec", "containers", str(cname), "image"), container, "image"


def insecure_registries(doc: Any) -> set[str]:
    """Every registry some level of the file lists as reachable over plain HTTP."""
    found: set[str] = set()
    levels = [doc.get("defaults")] + [
        level for section in ("groups", "hosts") for level in (doc.get(section) or {}).values()
    ]
    for level in levels:
        spec = level.get("spec") if isinstance(level, dict) else None
        if isinstance(spec, dict):
            found.update(spec.get("insecure_registries") or [])
    return found


def _request(url: str, method: str, headers: dict[str, str]) -> urllib.response.addinfourl:
    return urllib.request.urlopen(
        urllib.request.Request(url, method=method, headers=headers), timeout=TIMEOUT
    )


def _token(challenge: str, image: str) -> str:
    """A bearer token from the realm a registry's `WWW-Authenticate: Bearer ...` names
    (anonymous: what public registries hand out for pulls)."""
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = params.pop("realm", None)
    if not challenge.lower().startswith("bearer") or not realm:
        raise PinError(f"{image}: registry wants authentication gpurig cannot do: {challenge}")
    url = f"{realm}?{urllib.parse.urlencode(params)}"
    try:
        with _request(url, "GET", {}) as response:
            body = json.load(response)
    except urllib.error.HTTPError as exc:
        raise PinError(f"{image}: token request to {realm} failed: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise PinError(f"{image}: token request to {realm} failed: {exc}") from None
    token = body.get("token") or body.get("access_token")
    if not token:
        raise PinError(f"{image}: {realm} returned no token")
    return token


def resolve(image: str, insecure: set[str] | frozenset[str] = frozenset()) -> str:
    """The registry's digest for `image` (a tag), from `HEAD /v2/<name>/manifests/<tag>`."""
    ref = ImageRef.parse(image)
    scheme = "http" if ref.registry in insecure else "https"
    url = f"{scheme}://{ref.registry}/v2/{ref.repository}/manifests/{ref.tag}"
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}
    for attempt in range(2):
        try:
            with _request(url, "HEAD", headers) as response:
                digest = response.headers.get("Docker-Content-Digest", "")
            break
        except urllib.error.HTTPError as exc:
            challenge = exc.headers.get("WWW-Authenticate", "")
            if exc.code == 401 and challenge and attempt == 0:
                headers["Authorization"] = f"Bearer {_token(challenge, image)}"
                continue
            raise PinError(f"{image}: HTTP {exc.code} from {url}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PinError(f"{image}: cannot reach {url}: {reason}") from None
    if not DIGEST.match(digest):
        raise PinError(f"{image}: {url} sent no sha256 Docker-Content-Digest header")
    return digest


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap long lines
    return yaml


def unpinned(text: str) -> list[Unpinned]:
    """Images in the inventory text that have no digest."""
    doc = _yaml().load(text)
    return [
        Unpinned(path, mapping.lc.value(key)[0] + 1, mapping[key])
        for path, mapping, key in _image_slots(doc)
        if "@" not in mapping[key]
    ]


def pin_text(text: str) -> tuple[str, dict[str, str]]:
    """The inventory text with every tag replaced by `name@digest`, and what was resolved."""
    yaml = _yaml()
    doc = yaml.load(text)
    insecure = insecure_registries(doc)
    resolved: dict[str, str] = {}
    for _path, mapping, key in _image_slots(doc):
        image = mapping[key]
        if "@" in image:
            continue
        if image not in resolved:
            ref = ImageRef.parse(image)
            name = image[: -len(ref.tag) - 1] if image.endswith(f":{ref.tag}") else image
            resolved[image] = f"{name}@{resolve(image, insecure)}"
        mapping[key] = type(image)(resolved[image])  # keeps the quoting style
    out = StringIO()
    yaml.dump(doc, out)
    return out.getvalue(), resolved


def pin_file(path: Path) -> dict[str, str]:
    """Pin `path` in place (atomically); returns tag -> digest reference for what changed."""
    text, resolved = pin_text(path.read_text(encoding="utf-8"))
    if resolved:
        atomic_write(path, text, mode=path.stat().st_mode & 0o777)
    return resolved
