"""pyinfra inventory: `pyinfra inventory.py deploys/gpu_host.py` (run from the repository root).

Loads $GPURIG_INVENTORY (os.pathsep-separated) or inventories/*.yaml; an invalid inventory
exits 2 before pyinfra connects to anything.
"""

import sys as _sys
from pathlib import Path as _Path

from gpurig.remote.interrupt import install as _exit_on_interrupt
from gpurig.remote.pyinfra_guard import install as _guard_hosts
from gpurig.remote.pyinfra_inventory import load_groups as _load_groups
from gpurig.spec.inventory import InventoryError as _InventoryError

_guard_hosts()  # a host that dies mid-operation fails alone (gpurig/remote/pyinfra_guard.py)
_exit_on_interrupt()  # Ctrl-C and SIGTERM exit non-zero (gpurig/remote/interrupt.py)

try:
    globals().update(_load_groups(_Path(__file__).resolve().parent))
except _InventoryError as _exc:
    print(_exc, file=_sys.stderr)
    _sys.exit(2)
