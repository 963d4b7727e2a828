"""The probe's checks as separate shell commands, for the baselines in drift_bench.py."""

from pathlib import Path

CHECKS = [
    line
    for line in Path(__file__).with_name("checks.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]
