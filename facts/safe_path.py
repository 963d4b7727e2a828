"""The walk root acts by (gpurig/safe_path.py), as the shell text every command that acts as
root on a host path starts with: safe_path.sh's `walk` and `checked`."""

from __future__ import annotations

from pathlib import Path

SAFE_PATH = Path(__file__).with_name("safe_path.sh").read_text(encoding="utf-8")
