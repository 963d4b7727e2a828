"""SSH keys of the sandbox: one client key for the user, one host key per host."""

from __future__ import annotations

from pathlib import Path

from gpurig.sandbox.proc import run


def ensure_keypair(path: Path, comment: str) -> Path:
    """An ed25519 key pair at `path` (private) and `path.pub`, made when missing."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    return path


def public_key(path: Path) -> str:
    """`type base64` of a key pair, without its comment: the form an inventory records."""
    return " ".join(Path(f"{path}.pub").read_text().split()[:2])
