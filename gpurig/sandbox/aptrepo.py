"""A local signed apt repository on the sandbox bridge, standing in for NVIDIA's container
toolkit repository (out of reach here), so the deploy's key, repository, pin and hold path
runs for real: same flat layout (`deb [signed-by=...] URL /`), same package names and
dependencies, two versions so a pin is observable. The packages hold small scripts, not the
toolkit: nothing here touches a GPU. Beside them: stand-ins for two of Ubuntu's NVIDIA driver
packages (what a rental's image comes with; the driver concern holds them) and for Docker's
compose plugin release binary, at the path GitHub serves it from; and, when a test asks
(publish_docker_ce), Docker's own engine packages in a flat repository of their own."""

from __future__ import annotations

import hashlib
import shlex
import shutil
import sys
import tempfile
from email.utils import formatdate
from pathlib import Path

from gpurig.data.tables import table
from gpurig.fsutil import atomic_write
from gpurig.sandbox.proc import SandboxError, run, spawn_daemon

VERSIONS = ("1.17.8-1", "1.17.9-1")
# Ubuntu's names and version style (gpurig/data/driver.yaml); no nvidia-smi: no GPU here.
DRIVER_PACKAGES = ("nvidia-driver-580", "libnvidia-compute-580")
DRIVER_VERSIONS = ("580.95.05-0ubuntu1", "580.105.08-0ubuntu1")
COMPOSE_VERSIONS = ("2.29.7", "2.30.3")
KEY_NAME = "gpurig sandbox apt repository <apt@sandbox.invalid>"
TOOLS = ("dpkg-deb", "gpg", "gpgconf")

# Inter-package dependencies of the real packages (NVIDIA/nvidia-container-toolkit
# packaging/debian/control; libnvidia-container-tools gets libnvidia-container1 through
# shlibs). `{v}` is the version being built. The `>=` ones are why all four must be pinned:
# without a pin apt satisfies them with the newest version.
DEPENDS = {
    "nvidia-container-toolkit": "nvidia-container-toolkit-base (= {v}), "
    "libnvidia-container-tools (>= {v}), libnvidia-container-tools (<< 2.0.0)",
    "libnvidia-container-tools": "libnvidia-container1 (>= {v})",
    "nvidia-driver-580": "libnvidia-compute-580 (= {v})",
}

# Docker Engine from Docker's own repository, as most GPU cloud images ship it: the control
# fields that decide what apt removes (docker/docker-ce-packaging deb/common/control;
# containerd/containerd-packaging debian/control for containerd.io). Stand-ins with these
# fields are built from Debian's own docker.io, containerd and runc (docker_ce_repack), so the
# engine they run is real.
DOCKER_CE = {
    "docker-ce": "Conflicts: docker (<< 1.5~), docker-engine, docker.io\nReplaces: docker-engine\n",
    "docker-ce-cli": "Conflicts: docker (<< 1.5~), docker-engine, docker.io\n"
    "Replaces: docker-ce (<< 5:0)\nBreaks: docker-ce (<< 5:0)\n",
    "containerd.io": "Provides: containerd, runc\nConflicts: containerd, runc\n"
    "Replaces: containerd, runc\n",
}


DOCKER_CE_DIR = "docker-ce"  # below the repository's URL: its flat repository


def docker_ce_repack() -> str:
    """Shell for a Debian machine: download docker.io, containerd and runc from its apt sources
    and repack them, files, maintainer scripts and all, as docker-ce (the daemon),
    docker-ce-cli (the docker CLI) and containerd.io (containerd and runc), each with Docker's
    control fields (DOCKER_CE), Docker's epoch and Docker's dependencies between them, into
    the directory $out."""
    control = {name: shlex.quote(fields) for name, fields in DOCKER_CE.items()}
    describe = 'echo "Description: stand-in for Docker\'s $1 (gpurig sandbox)"'
    return (
        'set -e\ncd "$out"\n'
        "apt-get download -q docker.io containerd runc >/dev/null\n"
        'for p in docker.io containerd runc; do dpkg-deb -R "$p"_*.deb "$p"; done\n'
        "mkdir -p docker-ce-cli/DEBIAN docker-ce-cli/usr/bin\n"
        "mv docker.io/usr/bin/docker docker-ce-cli/usr/bin/docker\n"
        "mv docker.io docker-ce && mv containerd containerd.io && cp -a runc/usr containerd.io/\n"
        "rm -f docker-ce/DEBIAN/md5sums containerd.io/DEBIAN/md5sums\n"
        # Depends without containerd and runc (versioned: containerd.io's Provides cannot
        # satisfy them); Docker's own names are added instead.
        "deps() { dpkg-deb -f \"$1\" Depends | tr ',' '\\n' | sed 's/^ *//' | "
        "grep -v -e '^containerd' -e '^runc' | paste -sd, | sed 's/,/, /g'; }\n"
        # Package, the original's version (with `epoch`) and architecture, then `fields`.
        "ctl() { printf 'Package: %s\\nVersion: %s%s\\nArchitecture: %s\\n"
        'Maintainer: gpurig sandbox <apt@sandbox.invalid>\\n\' "$1" "$3" '
        '"$(dpkg-deb -f "$2" Version)" "$(dpkg-deb -f "$2" Architecture)"; '
        f'printf "%s%s" "$4" "$5"; {describe}; }}\n'
        'ctl docker-ce docker.io_*.deb 5: "Depends: containerd.io, docker-ce-cli, '
        f'$(deps docker.io_*.deb)\n" {control["docker-ce"]} > docker-ce/DEBIAN/control\n'
        f"ctl docker-ce-cli docker.io_*.deb 5: '' {control['docker-ce-cli']} "
        "> docker-ce-cli/DEBIAN/control\n"
        'ctl containerd.io containerd_*.deb "" "Depends: $(deps containerd_*.deb)\n" '
        f"{control['containerd.io']} > containerd.io/DEBIAN/control\n"
        # Uncompressed: gzip over their 250 MB took a minute of CPU, for a local download.
        "for p in docker-ce docker-ce-cli containerd.io; do\n"
        '  dpkg-deb --root-owner-group -Znone -b "$p" "$p.deb" >/dev/null\ndone\n'
    )


def _upstream(version: str) -> str:
    return version.rsplit("-", 1)[0]


def _scripts(package: str, version: str) -> dict[str, str]:
    """Files a stand-in package installs: where the real package has the same program."""
    v = _upstream(version)
    tag = f"(gpurig sandbox stand-in for {package} {version})"
    if package == "nvidia-container-toolkit-base":
        return {
            # The first two lines as the real `nvidia-ctk --version` prints them.
            "usr/bin/nvidia-ctk": "#!/bin/sh\n"
            'case "$1" in --version|-v) '
            f"printf 'NVIDIA Container Toolkit CLI version {v}\\ncommit: sandbox\\n'; exit 0;; "
            "esac\n"
            f"echo 'nvidia-ctk {tag}: only --version works here; no GPU' >&2; exit 1\n",
            # A real runtime adds the GPU hook, then runs runc; without a GPU, just runc.
            "usr/bin/nvidia-container-runtime": "#!/bin/sh\n"
            f'[ "$1" = --version ] && {{ echo "NVIDIA Container Runtime version {v} {tag}"; '
            'exit 0; }\nexec runc "$@"\n',
        }
    if package == "nvidia-container-toolkit":
        return {"usr/bin/nvidia-container-runtime-hook": f"#!/bin/sh\necho '{tag}'\n"}
    if package == "libnvidia-container-tools":
        return {"usr/bin/nvidia-container-cli": f"#!/bin/sh\necho '{tag}'\n"}
    return {f"usr/share/doc/{package}/STAND-IN": f"{tag}\n"}


def compose_path(version: str) -> str:
    """Where GitHub serves Docker's compose release binary for x86_64, below the host."""
    return f"docker/compose/releases/download/v{version}/docker-compose-linux-x86_64"


def compose_plugin(version: str) -> str:
    """A stand-in compose plugin: it answers the docker CLI's plugin metadata call, so `docker
    compose version` runs through a real docker CLI, and prints what the real one prints."""
    metadata = (
        f'{{"SchemaVersion":"0.1.0","Vendor":"Docker Inc.","Version":"v{version}",'
        '"ShortDescription":"Docker Compose (gpurig sandbox stand-in)"}'
    )
    return (
        "#!/bin/sh\n"
        f"[ \"$1\" = docker-cli-plugin-metadata ] && {{ echo '{metadata}'; exit 0; }}\n"
        '[ "$1" = compose ] && shift\n'
        f'[ "$1" = version ] && {{ echo "Docker Compose version v{version}"; exit 0; }}\n'
        "echo 'gpurig sandbox stand-in: only version works here' >&2; exit 1\n"
    )


def _control(package: str, version: str) -> str:
    depends = DEPENDS.get(package)
    return (
        f"Package: {package}\nVersion: {version}\nArchitecture: all\n"
        "Maintainer: gpurig sandbox <apt@sandbox.invalid>\nSection: utils\nPriority: optional\n"
        + (f"Depends: {depends.format(v=version)}\n" if depends else "")
        + f"Description: stand-in for NVIDIA's {package} (gpurig sandbox)\n"
    )


def _build_deb(package: str, version: str, staging: Path, pool: Path) -> str:
    """Build one .deb into `pool`; returns its entry for the `Packages` index."""
    root = staging / f"{package}_{version}"
    control = _control(package, version)
    atomic_write(root / "DEBIAN" / "control", control)
    for path, text in _scripts(package, version).items():
        atomic_write(root / path, text, mode=0o755 if path.startswith("usr/bin/") else 0o644)
    deb = pool / f"{package}_{version}_all.deb"
    run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)])
    data = deb.read_bytes()
    return (
        f"{control}Filename: ./{pool.name}/{deb.name}\nSize: {len(data)}\n"
        f"SHA256: {hashlib.sha256(data).hexdigest()}\n\n"
    )


def _release(repo: Path, files: list[str], label: str = "libnvidia-container") -> str:
    lines = [
        "Origin: gpurig sandbox",
        f"Label: gpurig sandbox stand-in for {label}",
        f"Date: {formatdate(usegmt=True)}",
        "SHA256:",
    ]
    for name in files:
        data = (repo / name).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data):>8} {name}")
    return "\n".join(lines) + "\n"


def _gpg(home: Path, *args: str) -> None:
    run(["gpg", "--homedir", str(home), "--batch", "--yes", "--quiet", *args])


def build(top: Path) -> Path:
    """The signed repository under `top/repo`, built once: an existing one is reused.

    Layout: `Packages`, `Release`, `InRelease`, `Release.gpg`, `gpgkey` (the ASCII-armored
    public key, like NVIDIA's) at the top, the .debs in `pool/`.
    """
    repo = top / "repo"
    if (repo / "InRelease").exists():
        return repo
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        raise SandboxError(f"missing tools for the apt repository: {', '.join(missing)}")
    staging = Path(tempfile.mkdtemp(prefix="repo.", dir=top))
    # The agent's socket lives in the home, and a socket path has at most 107 bytes: a
    # sandbox kept deep in the tree (pytest's tmp) would exceed it, so the home is short.
    home, out = Path(tempfile.mkdtemp(prefix="gpurig-gpg.")), staging / "repo"
    try:
        (out / "pool").mkdir(parents=True)
        builds = [(p, v) for v in VERSIONS for p in table("toolkit.yaml")["packages"]]
        builds += [(p, v) for v in DRIVER_VERSIONS for p in DRIVER_PACKAGES]
        index = "".join(_build_deb(p, v, staging, out / "pool") for p, v in builds)
        for version in COMPOSE_VERSIONS:
            atomic_write(out / compose_path(version), compose_plugin(version), mode=0o755)
        atomic_write(out / "Packages", index)
        atomic_write(out / "Release", _release(out, ["Packages"]))
        _gpg(home, "--pinentry-mode", "loopback", "--passphrase", "",
             "--quick-gen-key", KEY_NAME, "ed25519", "sign", "never")  # fmt: skip
        release = str(out / "Release")
        _gpg(home, "--clearsign", "-o", str(out / "InRelease"), release)
        _gpg(home, "--armor", "--detach-sign", "-o", str(out / "Release.gpg"), release)
        _gpg(home, "--armor", "--export", "-o", str(out / "gpgkey"))
        out.rename(repo)
    finally:
        # gpg started an agent for this throwaway home; it must not outlive the build.
        run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)
    return repo


def publish_docker_ce(top: Path) -> str:
    """The stand-ins for Docker's packages (docker_ce_repack), built once here from this
    machine's apt sources (Debian 12, the full hosts' release) and served by the repository
    in `DOCKER_CE_DIR`, a flat repository of their own (Docker's is one per release), so a
    host's apt resolves them and what they conflict with as it resolves Docker's. Returns
    that directory's path below the repository's URL."""
    dest = build(top) / DOCKER_CE_DIR
    if (dest / "Release").exists():
        return DOCKER_CE_DIR
    with tempfile.TemporaryDirectory(prefix="docker-ce.", dir=top) as out:
        run(["sh", "-c", docker_ce_repack()], env={"out": out})
        staging = Path(out, "repo")
        staging.mkdir()
        index = ""
        for name in DOCKER_CE:
            deb = Path(out, f"{name}.deb").rename(staging / f"{name}.deb")
            data = deb.read_bytes()
            index += (
                f"{run(['dpkg-deb', '-f', str(deb)]).stdout}Filename: ./{deb.name}\n"
                f"Size: {len(data)}\nSHA256: {hashlib.sha256(data).hexdigest()}\n\n"
            )
        atomic_write(staging / "Packages", index)
        atomic_write(staging / "Release", _release(staging, ["Packages"], "Docker's packages"))
        staging.rename(dest)
    return DOCKER_CE_DIR


def key_fingerprint(repo: Path) -> str:
    """The fingerprint of the repository's key (`gpgkey`), as `nvidia_toolkit.key_fingerprint`
    pins it (the key comes over plain HTTP)."""
    with tempfile.TemporaryDirectory(prefix="gpurig-gpg.") as home:
        shown = run(["gpg", "--homedir", home, "--batch", "--with-colons", "--show-keys",
                     str(repo / "gpgkey")]).stdout  # fmt: skip
    return next(line.split(":")[9] for line in shown.splitlines() if line.startswith("fpr:"))


def toolkit_spec(top: Path, repo_url: str, version: str) -> dict[str, str]:
    """`nvidia_toolkit` from the sandbox (directory `top`) whose repository is at `repo_url`:
    its key comes over plain HTTP, so it is pinned by fingerprint, as a user's mirror must be."""
    return {"version": version, "repo": repo_url, "key": f"{repo_url}/gpgkey",
            "key_fingerprint": key_fingerprint(top / "aptrepo" / "repo")}  # fmt: skip


def url(host: str, port: int) -> str:
    """The repository's URL, as `nvidia_toolkit.repo` declares it (`/gpgkey` below it)."""
    return f"http://{host}:{port}"


def start(top: Path, host: str, port: int) -> tuple[int, int | None]:
    """Build (once) and serve the repository on the bridge; returns pid and start time."""
    repo = build(top)
    argv = [sys.executable, "-m", "gpurig.sandbox.listen", host, str(port), "http", str(repo)]
    return spawn_daemon(argv, top / "http.log", host, port)
