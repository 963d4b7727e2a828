"""Merge gpurig's keys into a JSON config file, keeping every key it does not own."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

from pyinfra import host
from pyinfra.api import OperationError, operation
from pyinfra.operations import files

from facts.gpurig_json import JsonFile


def merged(current: dict[str, Any], owned: dict[str, Any]) -> dict[str, Any]:
    """`current` with gpurig's keys set; maps merge one level deep so foreign entries stay."""
    out = dict(current)
    for key, value in owned.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


@operation()
def json_keys(path: str, owned: dict[str, Any], mode: str = "644"):
    """Set `owned` keys in the JSON file at `path`; a no-op when they already hold."""
    current = host.get_fact(JsonFile, path=path)
    if current is None:
        raise OperationError(f"{path} is not a JSON object; fix or move it, gpurig will not guess")
    wanted = merged(current, owned)
    if wanted == current:
        host.noop(f"{path} already has gpurig's keys")
        return
    content = json.dumps(wanted, indent=2, sort_keys=True) + "\n"
    yield from files.put._inner(src=StringIO(content), dest=path, mode=mode)
