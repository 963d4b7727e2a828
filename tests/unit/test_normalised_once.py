"""The spec is normalised once, on the way in (gpurig.spec.inventory: a loaded host's spec has
its defaults and one spelling per value), and nowhere after: no module outside the inventory
model calls normalise, so drift over SSH, the node contracts, `up --local` and onboarding read
one spec, and a contract pays for it once."""

from __future__ import annotations

import ast
from pathlib import Path

from gpurig.spec.inventory import load_inventory_text, load_spec_file
from gpurig.spec.model import normalise

ROOT = Path(__file__).resolve().parents[2]


def callers() -> list[str]:
    """Each file of the package (facts/, deploys/ and inventory.py too) that calls normalise."""
    files = [*(ROOT / "gpurig").rglob("*.py"), *(ROOT / "facts").glob("*.py"),
             *(ROOT / "deploys").glob("*.py"), ROOT / "inventory.py"]  # fmt: skip
    found = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and ast.unparse(n.func).rpartition(".")[2] == "normalise"]  # fmt: skip
        if calls:
            found.append(str(path.relative_to(ROOT)))
    return sorted(found)


def test_only_the_inventory_model_normalises() -> None:
    assert callers() == ["gpurig/spec/inventory.py"]


def test_a_loaded_spec_is_normalised(tmp_path: Path) -> None:
    """From an inventory and from a spec file alike: normalising it again changes nothing."""
    spec = "engine: podman\ncontainers:\n  c:\n    image: r/x@sha256:" + "a" * 64 + "\n"
    file = tmp_path / "node.yaml"
    file.write_text(spec)
    inventory = "version: 1\nhosts:\n  h:\n    address: 192.0.2.1\n    spec:\n" + "".join(
        f"      {line}\n" for line in spec.splitlines()
    )
    loaded = [load_spec_file(file, "here"), *load_inventory_text(inventory, "fleet.yaml").hosts]
    for host in loaded:
        assert "core_dumps" in host.spec and host.spec["containers"]["c"]["gpus"] == "none"
        assert host.spec == normalise(host.spec)
