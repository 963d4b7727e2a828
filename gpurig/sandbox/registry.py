"""A local image registry (Debian's docker-registry) on the sandbox bridge, so hosts pull
images by digest for real."""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
from pathlib import Path

from gpurig.fsutil import atomic_write
from gpurig.sandbox.proc import SandboxError, run, spawn_daemon

# A tiny image (static busybox) for containers the tests and the demo run; pulled by digest.
TRAIN_REPOSITORY = "sandbox/train"
BUSYBOX = Path("/bin/busybox")
ETC_FILES = {
    "etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
    "etc/group": "root:x:0:\nnogroup:x:65534:\n",
}


def url(host: str, port: int) -> str:
    """The registry as image references and `insecure_registries` name it: host:port."""
    return f"{host}:{port}"


def start(top: Path, host: str, port: int) -> tuple[int, int | None]:
    """Start the registry; returns its pid and start time for the records."""
    binary = shutil.which("docker-registry")
    if not binary:
        raise SandboxError("docker-registry is not installed (apt-get install docker-registry)")
    config = top / "config.yml"
    atomic_write(
        config,
        "version: 0.1\n"
        "log: {level: warn}\n"
        f"storage: {{filesystem: {{rootdirectory: {top / 'data'}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: '{url(host, port)}'}}\n",
    )
    return spawn_daemon([binary, "serve", str(config)], top / "registry.log", host, port)


def _busybox_rootfs(dest: Path) -> None:
    """A root filesystem of one static busybox and its applet links, as a tarball."""
    applets = run([str(BUSYBOX), "--list"]).stdout.split()
    with tarfile.open(dest, "w") as tar:
        tar.add(BUSYBOX, arcname="bin/busybox")
        for applet in applets:
            if applet != "busybox":
                link = tarfile.TarInfo(f"bin/{applet}")
                link.type, link.linkname = tarfile.SYMTYPE, "busybox"
                tar.addfile(link)
        for d in ("tmp", "root", "etc", "workspace"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        for name, text in ETC_FILES.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def seed(registry: str, local: str, env: dict[str, str]) -> str:
    """Push the train image (built here as `local`) into `registry` (host:port); returns its
    reference by digest."""
    if not BUSYBOX.exists():
        raise SandboxError("busybox-static is not installed (apt-get install busybox-static)")
    with tempfile.TemporaryDirectory() as tmp:
        tarball = Path(tmp, "rootfs.tar")
        _busybox_rootfs(tarball)
        run(
            ["podman", "import", "--change", 'CMD ["sleep", "infinity"]', str(tarball), local],
            env=env,
        )
        digest_file = Path(tmp, "digest")
        run(
            ["podman", "push", "--quiet", "--tls-verify=false", "--digestfile", str(digest_file),
             local, f"docker://{registry}/{TRAIN_REPOSITORY}:1"],
            env=env,
        )  # fmt: skip
        return f"{registry}/{TRAIN_REPOSITORY}@{digest_file.read_text().strip()}"
