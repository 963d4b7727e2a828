"""`gpurig pin`: resolve container images given by tag to their registry digests and rewrite
the inventory in place, comments, order and formatting kept (a tag is
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from gpurig.fsutil import atomic_write
from gpurig.spec.container import DOCKER_HUB, ImageRef
from gpurig.spec.roundtrip_yaml import bounded_yaml, load
from gpurig.spec.text_file import YamlRefused, read_text

MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# Token services a registry may send gpurig to on a host other than its own. Docker Hub's
# realm is https://auth.docker.io/token (https://distribution.github.io/distribution/spec/auth/token/).
TOKEN_HOSTS = {DOCKER_HUB: ("auth.docker.io",)}
TIMEOUT = 30  # seconds per HTTP request
MAX_TOKEN_RESPONSE = 1024**2  # bytes; a token is a few KiB
# RFC 6750 2.1: what a bearer token may consist of (so it cannot break the header it goes in).
_TOKEN = re.compile(r"[A-Za-z0-9._~+/-]+=*")


class PinError(Exception):
    """A registry could not resolve an image; the message names the image and why."""


class PinInputError(Exception):
    """The inventory cannot be read as YAML: `FILE:LINE: what is wrong`, as validate says."""


# Why a URL may not be fetched (a reason), or None: applied to every redirect target.
Policy = Callable[[str], "str | None"]


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect as the same method (urllib turns HEAD into GET), send the registry's
    Authorization header on only to the same host, and refuse a target `policy` refuses."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        problem = self.policy(newurl) if self.policy else None
        if problem:
            raise PinError(f"refusing a redirect from {req.full_url}: {problem}")
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            new.method = req.get_method()
            if new.host != req.host:
                new.remove_header("Authorization")
        return new


def _opener(policy: Policy | None = None) -> urllib.request.OpenerDirector:
    """HTTP and HTTPS only: no file://, ftp:// or data: a registry could point gpurig at."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.HTTPHandler(),
        urllib.request.HTTPSHandler(),
        _Redirects(policy),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


@dataclass
class Unpinned:
    """An image value without a digest, with where it is in the file."""

    path: tuple[str, ...]
    line: int
    image: str


def _mapping(value: Any, key: str) -> dict[Any, Any]:
    """`value[key]` when both are mappings, else empty: pin walks files validate may refuse."""
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, dict) else {}


def _specs(doc: Any) -> Iterator[tuple[tuple[str, ...], dict[Any, Any]]]:
    """(key path, spec) of defaults, every group and every host that has a spec mapping."""
    levels = [(("defaults",), _mapping(doc, "defaults"))]
    for section in ("groups", "hosts"):
        levels += [((section, str(name)), level) for name, level in _mapping(doc, section).items()]
    for prefix, level in levels:
        if spec := _mapping(level, "spec"):
            yield (*prefix, "spec"), spec


def _image_slots(doc: Any) -> Iterator[tuple[tuple[str, ...], Any, str]]:
    """(key path, containing mapping, key) for every container image in the document."""
    for prefix, spec in _specs(doc):
        for cname, container in _mapping(spec, "containers").items():
            if isinstance(container, dict) and isinstance(container.get("image"), str):
                yield (*prefix, "containers", str(cname), "image"), container, "image"


def insecure_registries(doc: Any) -> set[str]:
    """Every registry some level of the file lists as reachable over plain HTTP."""
    found: set[str] = set()
    for _prefix, spec in _specs(doc):
        listed = spec.get("insecure_registries")
        if isinstance(listed, list):
            found.update(r for r in listed if isinstance(r, str))
    return found


def _request(
    url: str, method: str, headers: dict[str, str], policy: Policy | None = None
) -> urllib.response.addinfourl:
    request = urllib.request.Request(url, method=method, headers=headers)
    return _opener(policy).open(request, timeout=TIMEOUT)


def realm_problem(realm: str, ref: ImageRef, scheme: str) -> str | None:
    """Why gpurig will not ask `realm` for a token, or None: only the registry's own host (or
    its known token service), and only over HTTPS unless the registry itself is plain HTTP.
    The same rule holds for every URL a redirect from the realm leads to."""
    allowed = ("https", "http") if scheme == "http" else ("https",)
    try:
        url = urllib.parse.urlsplit(realm)
        hosts = (
            urllib.parse.urlsplit(f"//{ref.registry}").hostname,
            *TOKEN_HOSTS.get(ref.registry, ()),
        )
    except ValueError as exc:  # "http://[::1/": urlsplit refuses it
        return f"its token realm {realm} is not a URL ({exc})"
    if url.scheme not in allowed:
        return f"its token realm {realm} is not {' or '.join(f'{s}://' for s in allowed)}"
    if url.hostname not in hosts:
        return f"its token realm {realm} is on another host than {', '.join(map(str, hosts))}"
    return None


def _token(challenge: str, image: str, ref: ImageRef, scheme: str) -> str:
    """A bearer token from the realm a registry's `WWW-Authenticate: Bearer ...` names
    (anonymous: what public registries hand out for pulls)."""
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = params.pop("realm", None)
    if not challenge.lower().startswith("bearer") or not realm:
        raise PinError(f"{image}: registry wants authentication gpurig cannot do: {challenge}")
    problem = realm_problem(realm, ref, scheme)
    if problem:
        raise PinError(f"{image}: refusing the registry's token challenge: {problem}")
    url = f"{realm}?{urllib.parse.urlencode(params)}"

    def policy(target: str) -> str | None:
        return realm_problem(target, ref, scheme)

    try:
        with _request(url, "GET", {}, policy) as response:
            body = json.loads(response.read(MAX_TOKEN_RESPONSE + 1)[:MAX_TOKEN_RESPONSE])
    except PinError as exc:  # a redirect the realm rule refuses
        raise PinError(f"{image}: {exc}") from None
    except urllib.error.HTTPError as exc:
        raise PinError(f"{image}: token request to {realm} failed: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise PinError(f"{image}: token request to {realm} failed: {exc}") from None
    token = (body.get("token") or body.get("access_token")) if isinstance(body, dict) else None
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        raise PinError(f"{image}: {realm} returned no bearer token")
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
                headers["Authorization"] = f"Bearer {_token(challenge, image, ref, scheme)}"
                continue
            raise PinError(f"{image}: HTTP {exc.code} from {url}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:  # ValueError: "[::1"
            reason = getattr(exc, "reason", exc)
            raise PinError(f"{image}: cannot reach {url}: {reason}") from None
    if not DIGEST.fullmatch(digest):
        raise PinError(f"{image}: {url} sent no sha256 Docker-Content-Digest header")
    return digest


def _yaml() -> YAML:
    yaml = bounded_yaml()
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap long lines
    return yaml


def _refused(source: str | Path, exc: YamlRefused) -> PinInputError:
    where = source if exc.line is None else f"{source}:{exc.line}"
    return PinInputError(f"{where}: {exc.message}")


def _load(yaml: YAML, text: str, source: str) -> Any:
    try:
        return load(text, yaml)
    except YamlRefused as exc:
        raise _refused(source, exc) from None


def unpinned(text: str, source: str = "<inventory>") -> list[Unpinned]:
    """Images in the inventory text that have no digest."""
    doc = _load(_yaml(), text, source)
    return [
        Unpinned(path, mapping.lc.value(key)[0] + 1, mapping[key])
        for path, mapping, key in _image_slots(doc)
        if "@" not in mapping[key]
    ]


def pin_text(text: str, source: str = "<inventory>") -> tuple[str, dict[str, str]]:
    """The inventory text with every tag replaced by `name@digest`, and what was resolved."""
    yaml = _yaml()
    doc = _load(yaml, text, source)
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


def read_inventory(path: Path) -> str:
    """The file's text, refused as `gpurig validate` would refuse it (FIFOs, size, controls)."""
    try:
        return read_text(path)
    except YamlRefused as exc:
        raise _refused(path, exc) from None


def pin_file(path: Path) -> dict[str, str]:
    """Pin `path` in place (atomically); returns tag -> digest reference for what changed."""
    text, resolved = pin_text(read_inventory(path), str(path))
    if resolved:
        atomic_write(path, text, mode=path.stat().st_mode & 0o777)
    return resolved
