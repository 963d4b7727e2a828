"""Which sources a spec needs and how they are parsed (gpurig.read.sources), and the two facts
that read and try them, run for real here with sh and bash over loopback."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from gpurig.facts.gpurig_reach import AptSources, Reach
from gpurig.read import sources
from gpurig.read.sources import BadUrl, Endpoint
from gpurig.spec.model import normalise

# /etc/apt/sources.list.d/debian.sources as Debian 12's images ship it.
DEBIAN_SOURCES = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20231009T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.debian.org/archive/debian-security/20231009T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
IMAGE = "registry.example:5000/train@sha256:" + "a" * 64


def run_fact(fact: Any, **kwargs: Any) -> Any:
    """A fact's command run here by sh, its stdout handed to its own process()."""
    command = fact.command(**kwargs)
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=60)
    return fact.process(out.stdout.splitlines())


def test_one_line_and_deb822_sources_are_read_and_disabled_ones_skipped() -> None:
    files = {
        "/etc/apt/sources.list": "# deb http://old.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] https://mirror.example:8443/debian bookworm main\n"
        "deb-src http://src.example/debian bookworm main # sources too\n"
        "deb cdrom:[Debian 12]/ bookworm main\n",
        "/etc/apt/sources.list.d/debian.sources": DEBIAN_SOURCES,
        "/etc/apt/sources.list.d/off.sources": "Types: deb\nURIs: http://off.example/\n"
        "Suites: x\nEnabled: no\n",
    }
    assert sources.apt_uris(files) == [
        "https://mirror.example:8443/debian",
        "http://src.example/debian",
        "cdrom:[Debian",
        "http://deb.debian.org/debian",
        "http://deb.debian.org/debian-security",
    ]


def test_apt_endpoints_follow_the_proxy_and_skip_local_media() -> None:
    assert sources.apt_endpoint("http://deb.debian.org/debian", {}) == Endpoint(
        "deb.debian.org", 80
    )
    assert sources.apt_endpoint("mirror+https://m.example/list", {}) == Endpoint("m.example", 443)
    proxy = {"http": "http://10.0.0.9:3128/"}
    assert sources.apt_endpoint("http://deb.debian.org/debian", proxy) == Endpoint("10.0.0.9", 3128)
    assert sources.apt_endpoint("file:/srv/repo", proxy) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://$(reboot)/debian",
        "http://a b/",
        "http://host;rm -rf x/",
        "http://-rf/",
        "http://host:99999/",
        "ftp://deb.example/",
        "http:///nohost",
        "http://x\n.example/",
        "http://" + "a" * 64 + ".example/",
        # Brackets: urlsplit raises ValueError for the first three; the others it accepts.
        "http://[::1/",
        "http://]/",
        "http://[/",
        "http://[]/",
        "http://[::1]x/",
        "http://[v1.x]/",
        "http://[deb.example]/",
        "http://a:-1/",
        "http://a:99999999999999999999/",
    ],
)
def test_hostile_or_odd_urls_are_refused_before_any_command(url: str, faults: Any) -> None:
    """Every parser of the module refuses odd input with BadUrl, never another exception."""
    parsers = [
        sources.endpoint,
        lambda u: sources.git_endpoint(u),
        lambda u: sources.apt_endpoint(u, {}),
        lambda u: sources.apt_endpoint(f"mirror+{u}", {}),
        lambda u: sources.apt_endpoint("http://deb.example/", {"http": u}),
    ]
    for parse in parsers:
        assert faults.attempt(f"url {url!r}", lambda p=parse: p(url), BadUrl) is not None


def test_an_unclosed_bracket_in_an_apt_source_is_a_note_not_a_traceback() -> None:
    """`deb http://[::1/ jammy main` once ended onboarding in a ValueError from urlsplit."""
    from gpurig.facts.round_trip import read_key
    from gpurig.onboard.onboard import _reach, sources_check

    files = {"/etc/apt/sources.list": "deb http://[::1/ jammy main\n"}
    state = {read_key(AptSources, {}): {"files": files, "proxies": {}}}
    found = _reach(normalise({"packages": ["tmux"]}), 1)(None, state)
    check = sources_check(found, 1)
    assert check.status == "warn"
    assert check.detail == "not checked: apt source for packages: 'http://[::1/': Invalid IPv6 URL"


@pytest.mark.parametrize(
    ("url", "where"),
    [
        ("https://github.com/NovaSky-AI/SkyRL.git", Endpoint("github.com", 443)),
        ("ssh://git@git.example:2222/x.git", Endpoint("git.example", 2222)),
        ("git://10.1.2.3/x.git", Endpoint("10.1.2.3", 9418)),
        ("git@github.com:org/repo.git", Endpoint("github.com", 22)),
        ("http://[fd00::1]:8080/x.git", Endpoint("fd00::1", 8080)),
        ("/srv/git/x.git", None),
        ("file:///srv/git/x.git", None),
    ],
)
def test_git_remotes(url: str, where: Endpoint | None) -> None:
    assert sources.git_endpoint(url) == where


def test_registries_as_docker_resolves_them() -> None:
    assert sources.registry_endpoint(IMAGE, []) == Endpoint("registry.example", 5000)
    hub = "pytorch/pytorch@sha256:" + "b" * 64
    assert sources.registry_endpoint(hub, []) == Endpoint("registry-1.docker.io", 443)
    plain = "reg.lan/x@sha256:" + "c" * 64
    assert sources.registry_endpoint(plain, ["reg.lan"]) == Endpoint("reg.lan", 80)


def test_a_spec_needs_apt_only_when_a_concern_installs_packages() -> None:
    files = {"/etc/apt/sources.list.d/debian.sources": DEBIAN_SOURCES}
    bare = normalise({"engine": "none", "gpu": "absent"})
    assert sources.needed(bare, files, {}) == ([], [])
    spec = normalise({
        "engine": "docker", "packages": ["tmux"], "gpu": "auto",
        "nvidia_toolkit": {"version": "1.17.8-1"},
        "containers": {"train": {"image": IMAGE}},
        "repos": {"/w/r": {"url": "git@git.example:r.git", "ref": "0" * 40}},
    })  # fmt: skip
    found, skipped = sources.needed(spec, files, {})
    assert skipped == []
    assert [(s.concern, str(s.endpoint)) for s in found] == [
        ("apt source for packages, engine, toolkit, repos", "deb.debian.org:80"),
        ("apt source for packages, engine, toolkit, repos", "deb.debian.org:80"),
        ("toolkit repository", "nvidia.github.io:443"),
        ("toolkit key", "nvidia.github.io:443"),
        ("container train", "registry.example:5000"),
        ("repo /w/r", "git.example:22"),
    ]
    assert len(sources.by_endpoint(found)) == 4  # one connection per host and port


def test_a_source_gpurig_will_not_try_is_named_not_dropped() -> None:
    spec = normalise({"packages": ["tmux"]})
    files = {"/etc/apt/sources.list": "deb http://bad_host.example/debian bookworm main\n"}
    found, skipped = sources.needed(spec, files, {})
    assert found == []
    why = "'bad_host.example' is not a host name or IP address"
    assert skipped == [f"apt source for packages: {why}"]


def test_apt_sources_fact_reads_this_machine() -> None:
    found = run_fact(AptSources())
    assert set(found) == {"files", "proxies"}
    for path, text in found["files"].items():
        assert path.startswith("/etc/apt/sources.list")
        with open(path, encoding="utf-8") as f:
            assert f.read().rstrip("\n") == text.rstrip("\n")


@pytest.fixture
def listening() -> Iterator[int]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def test_reach_connects_and_names_what_refused(listening: int) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # bound, never listening: refused
        found = run_fact(
            Reach(), targets=[("127.0.0.1", listening), ("127.0.0.1", closed)], timeout=5
        )
    assert found == {f"127.0.0.1:{listening}": None, f"127.0.0.1:{closed}": "connection refused"}


def test_reach_refuses_a_hostile_target_before_the_shell() -> None:
    with pytest.raises(BadUrl):
        Reach().command(targets=[("$(touch /tmp/x)", 80)], timeout=1)
