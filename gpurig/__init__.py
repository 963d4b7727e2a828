"""gpurig: declarative provisioning and drift checking for GPU hosts.

The deploy tree pyinfra runs (`inventory.py`, `deploys/`, `facts/`, `schemas/`) sits beside this
package in a checkout and inside it, under `_deploy/`, in the wheel, so that an installed gpurig
adds no top-level names to site-packages. Either way DEPLOY_ROOT is that tree, and it is on this
package's path: `gpurig.facts` and `gpurig.deploys` are the one name of each in both layouts.
"""

import os as _os

__version__ = "0.1.0"

_HERE = _os.path.dirname(_os.path.abspath(__file__))
_SHIPPED = _os.path.join(_HERE, "_deploy")
DEPLOY_ROOT = _SHIPPED if _os.path.isdir(_SHIPPED) else _os.path.dirname(_HERE)
__path__.append(DEPLOY_ROOT)
