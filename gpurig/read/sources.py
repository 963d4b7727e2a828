"""What a host must reach for its spec's converge: apt sources, registries, git remotes, the
toolkit repository. Pure: the host's apt sources come in as text (facts.gpurig_reach), each URL
is parsed strictly here, and only a checked host name or address and a port number reach the
command that tries them (facts.gpurig_reach.Reach).

Which sources a spec needs is judged from the spec alone, as the converge might need them: a
concern that installs packages (packages, an engine, the toolkit, git for repos) needs every
enabled apt source, since one unreachable list fails `apt-get update`.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpurig.spec.container import ImageRef
from gpurig.spec.model import toolkit_wanted
from gpurig.spec.user_scope import is_user

# One DNS label; a host name is labels joined by dots (RFC 1123), at most 253 characters.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")
# `[userinfo@]host[:port]` where brackets hold the whole host or nothing (RFC 3986 3.2).
_NETLOC = re.compile(r"(?:[^@/\[\]]*@)?(?:\[(?P<v6>[^\]]*)\]|[^@/\[\]:]*)(?::\d*)?")
DEFAULT_PORTS = {"http": 80, "https": 443, "ssh": 22, "git": 9418}
# apt transports that are a local medium, not a network source: nothing to reach.
LOCAL_SCHEMES = {"file", "cdrom", "copy"}
# `# comment` to the end of a one-line source; `[options]` after the type.
_ONE_LINE = re.compile(r"^(deb|deb-src)\s+(?:\[[^\]]*\]\s+)?(\S+)(?:\s|$)")


class BadUrl(ValueError):
    """A URL gpurig will not try: its message says why."""


@dataclass(frozen=True)
class Endpoint:
    """Where to open a TCP connection: a checked host name or IP address and a port."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Source:
    """One thing the converge fetches from: which concern, what (the URL as written), where."""

    concern: str
    what: str
    endpoint: Endpoint


def checked_host(host: str) -> str:
    """`host` when it is an IP address or an RFC 1123 host name; BadUrl otherwise."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if len(host) > 253 or not _HOSTNAME.fullmatch(host):
        raise BadUrl(f"{host!r} is not a host name or IP address")
    return host


def endpoint(url: str, schemes: Iterable[str] = ("http", "https")) -> Endpoint:
    """Host and port of a `scheme://[user@]host[:port]/...` URL; BadUrl for anything else."""
    if any(c.isspace() or not c.isprintable() for c in url):
        raise BadUrl(f"{url!r} has spaces or control characters")
    try:  # urlsplit refuses an unclosed "[::1"; .port one that is not a number in 0-65535
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise BadUrl(f"{url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        raise BadUrl(f"{url!r}: scheme {scheme or 'none'} is not one of {', '.join(schemes)}")
    netloc = _NETLOC.fullmatch(parts.netloc)
    if netloc is None:
        raise BadUrl(f"{url!r}: {parts.netloc!r} is not [user@]host[:port]")
    if netloc["v6"] is not None:
        try:
            ipaddress.IPv6Address(netloc["v6"])
        except ValueError:
            raise BadUrl(f"{url!r}: [{netloc['v6']}] is not an IPv6 address") from None
    if not host:
        raise BadUrl(f"{url!r} names no host")
    return Endpoint(checked_host(host), port or DEFAULT_PORTS[scheme])


def git_endpoint(url: str) -> Endpoint | None:
    """Where `git clone url` connects; None for a local path or file:// (nothing to reach)."""
    if url.startswith("/") or url.lower().startswith("file://"):
        return None
    if "://" in url:
        return endpoint(url, ("http", "https", "ssh", "git"))
    # scp-like `[user@]host:path` (the inventory schema allows only this other form)
    host = url.split(":", 1)[0].rsplit("@", 1)[-1]
    return Endpoint(checked_host(host), DEFAULT_PORTS["ssh"])


def registry_endpoint(image: str, insecure: Sequence[str]) -> Endpoint:
    """The registry an image is pulled from: its own port, else 443 (80 for a plain-HTTP
    registry given without one)."""
    registry = ImageRef.parse(image).registry
    scheme = "http" if registry in insecure else "https"
    return endpoint(f"{scheme}://{registry}/")


def apt_uris(files: Mapping[str, str]) -> list[str]:
    """Every URI the enabled entries of these apt source files name, in file order.

    One-line files (`.list`): `deb [options] URI suite ...`; deb822 files (`.sources`):
    `URIs:` of each stanza not marked `Enabled: no`."""
    uris: list[str] = []
    for path, text in files.items():
        if path.endswith(".sources"):
            for stanza in re.split(r"\n[ \t]*\n", text):
                fields = _deb822(stanza)
                if fields.get("enabled", "yes").lower() != "no" and fields.get("types"):
                    uris += fields.get("uris", "").split()
            continue
        for line in text.splitlines():
            match = _ONE_LINE.match(line.split("#", 1)[0].strip())
            if match:
                uris.append(match.group(2))
    return list(dict.fromkeys(uris))


def _deb822(stanza: str) -> dict[str, str]:
    """A stanza's single-line fields, names lower-cased; continuation lines are ignored."""
    fields: dict[str, str] = {}
    for line in stanza.splitlines():
        if line[:1] in (" ", "\t", "#") or ":" not in line:
            continue
        name, value = line.split(":", 1)
        fields[name.strip().lower()] = value.strip()
    return fields


def apt_endpoint(uri: str, proxies: Mapping[str, str]) -> Endpoint | None:
    """Where apt connects for `uri`: its proxy when one is set for the scheme, the host
    otherwise; None for a local medium. `mirror+http://` names a mirror list fetched over http."""
    scheme = uri.split(":", 1)[0].lower()
    if scheme in LOCAL_SCHEMES:
        return None
    if scheme.startswith("mirror+"):
        uri, scheme = uri[len("mirror+") :], scheme[len("mirror+") :]
    proxy = proxies.get(scheme, "")
    if proxy and proxy.upper() != "DIRECT":
        return endpoint(proxy)
    return endpoint(uri)


def apt_needed(spec: Mapping[str, Any]) -> list[str]:
    """The concerns of this spec that may run apt-get (and so need every apt source): none
    with scope: user, which installs nothing."""
    if is_user(spec):
        return []
    concerns = []
    if spec["packages"]:
        concerns.append("packages")
    if spec["engine"] in ("docker", "podman"):
        concerns.append("engine")
    if toolkit_wanted(spec):
        concerns.append("toolkit")
    if spec["repos"]:
        concerns.append("repos")
    return concerns


def needed(
    spec: Mapping[str, Any], apt_files: Mapping[str, str], proxies: Mapping[str, str]
) -> tuple[list[Source], list[str]]:
    """The sources this (normalised) spec's converge may fetch from, and a note for each one
    that cannot be checked (a URL gpurig will not try, named with why)."""
    found: list[Source] = []
    skipped: list[str] = []

    def add(concern: str, what: str, reach: Any, *args: Any) -> None:
        try:
            where = reach(*args)
        except BadUrl as exc:
            skipped.append(f"{concern}: {exc}")
            return
        if where is not None:
            found.append(Source(concern, what, where))

    users = apt_needed(spec)
    if users:
        label = "apt source for " + ", ".join(users)
        for uri in apt_uris(apt_files):
            add(label, uri, apt_endpoint, uri, proxies)
    if toolkit_wanted(spec):
        settings = spec["nvidia_toolkit"]
        add("toolkit repository", settings["repo"], endpoint, settings["repo"])
        add("toolkit key", settings["key"], endpoint, settings["key"])
    for name, container in spec["containers"].items():
        image = container["image"]
        add(f"container {name}", image, registry_endpoint, image, spec["insecure_registries"])
    for path, repo in spec["repos"].items():
        add(f"repo {path}", repo["url"], git_endpoint, repo["url"])
    return found, skipped


def by_endpoint(sources: Sequence[Source]) -> dict[Endpoint, list[Source]]:
    """Sources grouped by where they connect: one connection attempt per endpoint."""
    grouped: dict[Endpoint, list[Source]] = {}
    for source in sources:
        grouped.setdefault(source.endpoint, []).append(source)
    return grouped
