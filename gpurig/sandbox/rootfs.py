"""The Debian rootfs every sandbox host runs on, built once by debootstrap and cached."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from gpurig.fsutil import xdg_dir
from gpurig.sandbox.proc import SandboxError, run

# The Debian releases a sandbox host runs (`sandbox up --release`), oldest first; the default
# is the release this machine's tools were built on.
RELEASES = {"bullseye": "11", "bookworm": "12", "trixie": "13"}
DEFAULT_RELEASE = "bookworm"
# What a rented Debian box has, plus what the sandbox itself needs (sshd, systemd for full hosts).
# The names are the same in all three releases; a release whose names differ gets its own
# list here.
PACKAGES = (
    "openssh-server,python3,systemd,systemd-sysv,dbus,iproute2,ca-certificates,"
    "gnupg,curl,procps,sudo,git"
)
RELEASE_PACKAGES: dict[str, str] = {}
# Only the ed25519 host key: each host gets its own, generated before it starts.
SSHD_CONFIG = """\
HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UseDNS no
"""


def host_name(kind: str, number: str, release: str) -> str:
    """`full-1`, `fleet-001` on the default release; `full-trixie-1`, ... on another."""
    return f"{kind}-{number}" if release == DEFAULT_RELEASE else f"{kind}-{release}-{number}"


def check_release(release: str) -> str:
    if release not in RELEASES:
        raise SandboxError(f"unknown release {release!r}: one of {', '.join(RELEASES)}")
    return release


def packages(release: str) -> str:
    return RELEASE_PACKAGES.get(release, PACKAGES)


def cache_key(release: str) -> str:
    """Each release's rootfs is cached apart: the suite is part of the key."""
    text = f"{check_release(release)}|{packages(release)}|{SSHD_CONFIG}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def cache_dir() -> Path:
    return xdg_dir("XDG_CACHE_HOME", ".cache", "sandbox")


def tarball(release: str) -> Path:
    """The release's cached rootfs tarball, built with debootstrap when missing (a few
    minutes, once per release)."""
    path = cache_dir() / f"rootfs-{release}-{cache_key(release)}.tar"
    if path.exists():
        return path
    if not shutil.which("debootstrap"):
        raise SandboxError("debootstrap is not installed (apt-get install debootstrap)")
    mirror = os.environ.get("GPURIG_DEBIAN_MIRROR", "http://deb.debian.org/debian")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".build-") as tmp:
        root = Path(tmp, "root")
        run(["debootstrap", "--variant=minbase", f"--include={packages(release)}", release,
             str(root), mirror])  # fmt: skip
        for key in (root / "etc/ssh").glob("ssh_host_*"):
            key.unlink()
        (root / "etc/ssh/sshd_config.d/gpurig-sandbox.conf").write_text(SSHD_CONFIG)
        (root / "etc/hostname").write_text("sandbox\n")
        shutil.rmtree(root / "var/cache/apt/archives", ignore_errors=True)
        (root / "var/cache/apt/archives/partial").mkdir(parents=True)
        partial = Path(tmp, "rootfs.tar")
        run(["tar", "-C", str(root), "-cf", str(partial), "."])
        partial.rename(path)
    return path


def extract(dest: Path, release: str) -> Path:
    """Unpack the release's rootfs once per sandbox as the read-only lower layer of its
    fleet hosts."""
    src = tarball(release)
    marker = dest / ".gpurig-rootfs"
    if marker.exists() and marker.read_text() == src.name:
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    run(["tar", "-C", str(dest), "-xf", str(src)])
    marker.write_text(src.name)
    return dest


def image_ref(release: str) -> str:
    return f"localhost/gpurig-sandbox-host:{cache_key(release)}"


def image(env: dict[str, str], release: str) -> str:
    """The release's rootfs as a local Podman image for full hosts, imported once."""
    src = tarball(release)
    ref = image_ref(release)
    if run(["podman", "image", "exists", ref], check=False, env=env).returncode != 0:
        run(["podman", "import", "--change", 'CMD ["/sbin/init"]', str(src), ref], env=env)
    return ref
