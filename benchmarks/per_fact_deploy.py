"""The probe's checks as ordinary pyinfra facts, one remote command each (the baseline)."""

from pyinfra import host
from pyinfra.facts.server import Command

from benchmarks.checks import CHECKS

for check in CHECKS:
    host.get_fact(Command, command=check)
