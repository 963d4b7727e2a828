"""`gpurig pin` against a tiny Docker Registry v2 server on 127.0.0.1 (HEAD manifests, a token
challenge like Docker Hub's), through the CLI and through the functions."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpurig.cli.main import main
from gpurig.onboard.pin import (
    DOCKER_HUB,
    MANIFEST_TYPES,
    ImageRef,
    PinError,
    realm_problem,
    resolve,
)
from gpurig.spec.inventory import load_inventory

DIGESTS = {("team/train", "1"): "sha256:" + "a" * 64, ("team/auth", "2"): "sha256:" + "b" * 64}
TOKEN = "t0ken"
# Repositories whose token realm is not the registry's own: {HOST} is the Host header, {PORT}
# the server's port; a test may add its own.
REALMS = {"team/auth": "http://{HOST}/token", "team/moved": "http://{HOST}/token"}
SEEN: list[tuple[str, str, str | None]] = []
# Where the realm /token-moved redirects to (a test sets it).
REDIRECT = "http://{HOST}/token?service=reg"  # (Host, path, Authorization) of every request


class Registry(BaseHTTPRequestHandler):
    """Manifests by tag; `team/auth` wants a bearer token from /token first; `team/moved`
    too, and then redirects to the same manifest on `localhost`, another host by name."""

    def log_message(self, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        SEEN.append((self.headers["Host"], self.path, self.headers.get("Authorization")))
        parts = self.path.split("/manifests/")
        name, tag = parts[0].removeprefix("/v2/"), parts[-1]
        accepted = self.headers.get("Accept", "")
        port = self.server.server_address[1]
        if name in REALMS and self.headers.get("Authorization") != f"Bearer {TOKEN}":
            realm = REALMS[name].format(HOST=self.headers["Host"], PORT=port)
            self.send_response(401)
            self.send_header(
                "WWW-Authenticate", f'Bearer realm="{realm}",service="reg",scope="pull"'
            )
        elif name == "team/moved":
            self.send_response(307)
            self.send_header("Location", f"http://localhost:{port}/v2/team/train/manifests/{tag}")
        elif (name, tag) in DIGESTS and all(t in accepted for t in MANIFEST_TYPES):
            self.send_response(200)
            self.send_header("Docker-Content-Digest", DIGESTS[(name, tag)])
        else:
            self.send_response(404)
        self.end_headers()

    def do_GET(self) -> None:
        SEEN.append((self.headers["Host"], self.path, self.headers.get("Authorization")))
        if self.path.startswith("/token-moved?"):  # the realm redirects: to where REDIRECT says
            port = self.server.server_address[1]
            self.send_response(302)
            self.send_header("Location", REDIRECT.format(HOST=self.headers["Host"], PORT=port))
            self.end_headers()
            return
        body = json.dumps({"token": TOKEN}).encode()
        ok = self.path.startswith("/token?") and "service=reg" in self.path
        self.send_response(200 if ok else 400)
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def registry() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    SEEN.clear()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


INVENTORY = """\
# The training fleet.
version: 1
defaults:
  spec:
    insecure_registries: ["{reg}"]   # plain HTTP on the cluster network
    containers:
      train:
        image: {reg}/team/train:1 # bumped weekly
hosts:
  b:   # second box
    address: 203.0.113.2
    spec:
      containers:
        auth: {{image: "{reg}/team/auth:2", shm_size: 1g}}
        done:
          image: {reg}/team/train@sha256:{done}
"""


def write(tmp_path: Path, reg: str) -> Path:
    path = tmp_path / "fleet.yaml"
    path.write_text(INVENTORY.format(reg=reg, done="c" * 64))
    return path


def test_pin_rewrites_tags_to_digests_keeping_comments_and_layout(registry: str, tmp_path: Path):
    path = write(tmp_path, registry)
    result = CliRunner().invoke(main, ["pin", str(path)])
    assert result.exit_code == 0, result.output
    expected = (
        INVENTORY.format(reg=registry, done="c" * 64)
        .replace("team/train:1", f"team/train@{DIGESTS[('team/train', '1')]}")
        .replace("team/auth:2", f"team/auth@{DIGESTS[('team/auth', '2')]}")
    )
    assert path.read_text() == expected
    assert load_inventory([path]).hosts[0].spec["containers"]["train"]["image"].endswith("a" * 64)
    again = CliRunner().invoke(main, ["pin", str(path)])
    assert again.exit_code == 0 and "already pinned" in again.output


def test_check_lists_unpinned_images_then_passes(registry: str, tmp_path: Path):
    path = write(tmp_path, registry)
    before = path.read_text()
    result = CliRunner().invoke(main, ["pin", "--check", str(path)])
    assert result.exit_code == 1
    assert f"fleet.yaml:8: defaults.spec.containers.train.image: not pinned: {registry}" in (
        result.output
    )
    assert "fleet.yaml:14: hosts.b.spec.containers.auth.image" in result.output
    assert "done" not in result.output
    assert path.read_text() == before  # --check changes nothing
    CliRunner().invoke(main, ["pin", str(path)])
    assert CliRunner().invoke(main, ["pin", "--check", str(path)]).exit_code == 0


def test_check_counts_one_unpinned_image_as_one(tmp_path: Path):
    path = tmp_path / "one.yaml"
    path.write_text(
        "version: 1\nhosts:\n  a:\n    address: 203.0.113.1\n"
        "    spec: {containers: {train: {image: registry.example/team/train:1}}}\n"
    )
    result = CliRunner().invoke(main, ["pin", "--check", str(path)])
    assert result.exit_code == 1
    assert result.stderr == f"1 unpinned image; run `gpurig pin {path}`\n"


def test_unknown_tag_fails_naming_image_and_status(registry: str, tmp_path: Path):
    path = tmp_path / "fleet.yaml"
    path.write_text(
        f'version: 1\ndefaults: {{spec: {{insecure_registries: ["{registry}"]}}}}\n'
        f"hosts: {{a: {{address: 203.0.113.1, spec: {{containers: "
        f"{{x: {{image: {registry}/team/none:9}}}}}}}}}}\n"
    )
    before = path.read_text()
    result = CliRunner().invoke(main, ["pin", str(path)])
    assert result.exit_code == 1
    assert f"{registry}/team/none:9: HTTP 404" in result.output
    assert path.read_text() == before


def test_https_unless_insecure(registry: str):
    with pytest.raises(PinError, match="cannot reach https://"):
        resolve(f"{registry}/team/train:1")
    assert resolve(f"{registry}/team/train:1", {registry}) == DIGESTS[("team/train", "1")]


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("ubuntu", ImageRef("registry-1.docker.io", "library/ubuntu", "latest")),
        ("org/app:1.2", ImageRef("registry-1.docker.io", "org/app", "1.2")),
        ("ghcr.io/org/app:v1", ImageRef("ghcr.io", "org/app", "v1")),
        ("10.0.0.5:5000/app", ImageRef("10.0.0.5:5000", "app", "latest")),
        ("localhost/a/b:2", ImageRef("localhost", "a/b", "2")),
    ],
)
def test_image_references_parse_like_docker(image: str, expected: ImageRef):
    assert ImageRef.parse(image) == expected


def test_token_from_the_registrys_own_host_is_used(registry: str):
    assert resolve(f"{registry}/team/auth:2", {registry}) == DIGESTS[("team/auth", "2")]
    assert (registry, "/v2/team/auth/manifests/2", f"Bearer {TOKEN}") in SEEN


@pytest.mark.parametrize(
    ("realm", "why"),
    [
        ("file://{TOKEN_FILE}", "is not https:// or http://"),
        ("http://localhost:{PORT}/token", "is on another host than 127.0.0.1"),
        ("http://127.0.0.1@localhost:{PORT}/token", "is on another host than 127.0.0.1"),
        ("ftp://127.0.0.1/token", "is not https:// or http://"),
    ],
)
def test_token_realm_elsewhere_is_refused_and_never_asked(
    registry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, realm: str, why: str
):
    """A registry must not make gpurig read a local file, or ask another host, for a token: the
    answer would go back to the registry as the bearer token (file:// once did exactly that)."""
    token_file = tmp_path / "token.json"
    token_file.write_text(json.dumps({"token": "from-a-local-file"}))
    realm = realm.replace("{TOKEN_FILE}", str(token_file))
    monkeypatch.setitem(REALMS, "team/evil", realm)
    with pytest.raises(PinError, match="refusing the registry's token challenge") as info:
        resolve(f"{registry}/team/evil:1", {registry})
    assert why in str(info.value)
    assert [path for _, path, _ in SEEN] == ["/v2/team/evil/manifests/1"]  # no token request
    assert all(auth is None for _, _, auth in SEEN)


def test_authorization_is_not_sent_on_to_another_host(registry: str):
    """A redirect to another host gets the request, not the registry's token."""
    assert resolve(f"{registry}/team/moved:1", {registry}) == DIGESTS[("team/train", "1")]
    port = registry.rsplit(":", 1)[1]
    assert (registry, "/v2/team/moved/manifests/1", f"Bearer {TOKEN}") in SEEN
    assert (f"localhost:{port}", "/v2/team/train/manifests/1", None) in SEEN
    assert all(auth is None for host, _, auth in SEEN if host.startswith("localhost"))


@pytest.mark.parametrize(
    ("realm", "registry", "scheme", "allowed"),
    [
        ("https://ghcr.io/token", "ghcr.io", "https", True),
        ("https://GHCR.io/token", "ghcr.io", "https", True),
        ("http://ghcr.io/token", "ghcr.io", "https", False),  # no downgrade
        ("http://10.0.0.5:5001/auth", "10.0.0.5:5000", "http", True),  # insecure registry
        ("https://auth.docker.io/token", DOCKER_HUB, "https", True),
        ("https://auth.docker.io/token", "ghcr.io", "https", False),
        ("https://evil.example/token", "ghcr.io", "https", False),
        ("https://ghcr.io.evil.example/token", "ghcr.io", "https", False),
        ("https://ghcr.io@evil.example/token", "ghcr.io", "https", False),
        ("file:///etc/passwd", "ghcr.io", "https", False),
        ("data:,{}", "ghcr.io", "https", False),
        ("/token", "ghcr.io", "https", False),
    ],
)
def test_realm_rule(realm: str, registry: str, scheme: str, allowed: bool):
    ref = ImageRef(registry, "org/app", "1")
    assert (realm_problem(realm, ref, scheme) is None) == allowed


@pytest.mark.parametrize(
    ("target", "why"),
    [
        # Another host by name: a cloud metadata service answers like this, and its answer
        # would go back to the registry as the bearer token.
        ("http://localhost:{PORT}/token?service=reg", "is on another host than 127.0.0.1"),
        ("http://127.0.0.1@localhost:{PORT}/token?service=reg", "another host than 127.0.0.1"),
        ("http://169.254.169.254/latest/meta-data/iam/", "is on another host than 127.0.0.1"),
    ],
)
def test_a_redirect_from_the_realm_is_held_to_the_realm_rule(
    registry: str, monkeypatch: pytest.MonkeyPatch, faults, target: str, why: str
):
    """The realm passes the rule, then redirects elsewhere: the target is refused before any
    request reaches it, and nothing goes back to the registry as a token."""
    monkeypatch.setitem(REALMS, "team/evil", "http://{HOST}/token-moved")
    monkeypatch.setitem(globals(), "REDIRECT", target)
    image = f"{registry}/team/evil:1"
    error = faults.attempt(f"realm redirect {target}", lambda: resolve(image, {registry}), PinError)
    assert error is not None and "refusing a redirect from http://127.0.0.1:" in str(error)
    assert why in str(error) and str(error).startswith(f"{image}: ")
    hosts = {host for host, _, _ in SEEN}
    faults.secrets_sent += sum(host != registry or auth is not None for host, _, auth in SEEN)
    assert hosts == {registry}  # localhost (the other host) never saw a request
    assert [path.split("?")[0] for _, path, _ in SEEN] == [
        "/v2/team/evil/manifests/1",
        "/token-moved",
    ]
    assert all(auth is None for _, _, auth in SEEN)  # no token went back to the registry


def test_a_redirect_within_the_realm_host_is_followed(
    registry: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setitem(REALMS, "team/auth", "http://{HOST}/token-moved")
    assert resolve(f"{registry}/team/auth:2", {registry}) == DIGESTS[("team/auth", "2")]
    assert [path.split("?")[0] for _, path, _ in SEEN] == [
        "/v2/team/auth/manifests/2",
        "/token-moved",
        "/token",
        "/v2/team/auth/manifests/2",
    ]


def test_an_odd_realm_url_is_refused_with_pins_own_error():
    ref = ImageRef("ghcr.io", "org/app", "1")
    assert "is not a URL" in str(realm_problem("https://[::1/token", ref, "https"))
    assert "is not a URL" in str(
        realm_problem("https://ghcr.io/t", ImageRef("[::1", "a", "1"), "https")
    )
