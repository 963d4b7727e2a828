"""Converge one host to its inventory `spec`: `pyinfra inventory.py deploys/gpu_host.py`.

Run it from the repository root (pyinfra puts the current directory on sys.path). Every fact
the plans need is read in one remote command first; operations that find nothing to change
run no command at all, so a converged host costs one round trip. Last, the errors drift would
still report about what the converge manages and cannot fix (a login file raising the core
limit again) fail the host in drift's words, as a refusal does (deploys/managed.py).
"""

from pyinfra import host
from pyinfra.api import OperationError

from gpurig.checks.managed import converge_reads
from gpurig.deploys import lock, snapshot
from gpurig.deploys.cleanup import cleanup
from gpurig.deploys.compose import compose
from gpurig.deploys.containers import containers
from gpurig.deploys.core_dumps import core_dumps
from gpurig.deploys.driver import driver
from gpurig.deploys.engine import engine
from gpurig.deploys.guard import refuse
from gpurig.deploys.managed import left_as_drift
from gpurig.deploys.packages import packages
from gpurig.deploys.repos import repos
from gpurig.deploys.secrets import secrets
from gpurig.deploys.toolkit import nvidia_toolkit
from gpurig.facts.round_trip import Unreadable

spec = host.data.get("spec")  # normalised when the inventory was loaded (gpurig.spec.model)
allow = str(host.data.get("allow_recreate", "")).lower() in ("1", "true", "yes")
busy = lock.hold()
if busy:
    # Nothing more is read: a host whose lock was refused (sudo asking for a password, another
    # account's runtime directory) says why once, in gpurig's words. The refusal needs no sudo.
    refuse(name="One converge at a time", reason=busy, _sudo=False)
else:
    try:
        snapshot.load(converge_reads(spec, allow))

        # Secrets first: their sources are checked before anything on the host changes. Code
        # and its environments, then the engine and compose, the driver held before the
        # toolkit; cleanup runs last before containers start, so nothing launched by this run
        # is mistaken for a leftover.
        secrets(spec)
        packages(spec)
        core_dumps(spec)
        repos(spec)
        engine(spec)
        compose(spec)
        driver(spec)
        nvidia_toolkit(spec)
        cleanup(spec)
        containers(spec, allow)
        # What drift would still say is an error: the converge says it too, and fails.
        left_as_drift(spec)
    except Unreadable as exc:  # what this host printed: it fails alone (raised, it stops all)
        refuse(
            name="Read the host",
            reason=f"the host's output could not be read: {exc}",
            _sudo=False,
        )
    except OperationError as exc:  # a refusal, raised while pyinfra prepares: this host's
        # run fails with its reason (what was prepared before it runs), the others go on.
        refuse(name="Refused", reason=f"refused: {exc}", _sudo=False)
