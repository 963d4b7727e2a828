"""Converge one host to its inventory `spec`: `pyinfra inventory.py deploys/gpu_host.py`.

Run it from the repository root (pyinfra puts the current directory on sys.path).
"""

from pyinfra import host

from deploys.containers import containers
from deploys.core_dumps import core_dumps
from deploys.engine import engine
from deploys.nvidia_toolkit import nvidia_toolkit
from deploys.packages import packages

spec = host.data.get("spec") or {}

packages(spec)
core_dumps(spec)
engine(spec)
nvidia_toolkit(spec)
containers(spec)
