"""gpurig drift's reads as ordinary pyinfra facts, one remote command each (the baseline)."""

from pyinfra import host
from pyinfra.facts.server import Command

from benchmarks.checks import checks

for check in checks(host.data.get("spec")):
    host.get_fact(Command, command=check)
