"""The Debian rootfs every sandbox host runs on, built once by debootstrap and cached."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from gpurig.fsutil import xdg_dir
from gpurig.sandbox.proc import SandboxError, run

SUITE = "bookworm"
# What a rented Debian box has, plus what the sandbox itself needs (sshd, systemd for full hosts).
PACKAGES = (
    "openssh-server,python3,systemd,systemd-sysv,dbus,iproute2,ca-certificates,"
    "gnupg,curl,procps,sudo,git"
)
# Only the ed25519 host key: each host gets its own, generated before it starts.
SSHD_CONFIG = """\
HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UseDNS no
"""


def cache_key() -> str:
    return hashlib.sha256(f"{SUITE}|{PACKAGES}|{SSHD_CONFIG}".encode()).hexdigest()[:12]


def cache_dir() -> Path:
    return xdg_dir("XDG_CACHE_HOME", ".cache", "sandbox")


def tarball() -> Path:
    """The cached rootfs tarball, built with debootstrap when missing (a few minutes, once)."""
    path = cache_dir() / f"rootfs-{SUITE}-{cache_key()}.tar"
    if path.exists():
        return path
    if not shutil.which("debootstrap"):
        raise SandboxError("debootstrap is not installed (apt-get install debootstrap)")
    mirror = os.environ.get("GPURIG_DEBIAN_MIRROR", "http://deb.debian.org/debian")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".build-") as tmp:
        root = Path(tmp, "root")
        run(["debootstrap", "--variant=minbase", f"--include={PACKAGES}", SUITE, str(root), mirror])
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


def extract(dest: Path) -> Path:
    """Unpack the rootfs once per sandbox as the read-only lower layer of every fleet host."""
    src = tarball()
    marker = dest / ".gpurig-rootfs"
    if marker.exists() and marker.read_text() == src.name:
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    run(["tar", "-C", str(dest), "-xf", str(src)])
    marker.write_text(src.name)
    return dest


def image_ref() -> str:
    return f"localhost/gpurig-sandbox-host:{cache_key()}"


def image(env: dict[str, str]) -> str:
    """The rootfs as a local Podman image for full hosts, imported once."""
    src = tarball()
    ref = image_ref()
    if run(["podman", "image", "exists", ref], check=False, env=env).returncode != 0:
        run(["podman", "import", "--change", 'CMD ["/sbin/init"]', str(src), ref], env=env)
    return ref
