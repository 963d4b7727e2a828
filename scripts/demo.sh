#!/bin/sh
# The demo: a sandbox host of real SSH, converged with deploys/gpu_host.py, twice.
# Needs root. `gpurig sandbox down` removes it afterwards.
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
PATH="$PWD/.venv/bin:$PATH"
export PATH

echo "== gpurig sandbox up --fleet 2 --full 1 (first time: builds a Debian rootfs, ~2 min)"
gpurig sandbox up --fleet 2 --full 1
inventory="${GPURIG_SANDBOX_DIR:-$HOME/.local/state/gpurig/sandbox}/inventory.yaml"
gpurig validate "$inventory"

echo "== converge: pyinfra inventory.py deploys/gpu_host.py"
GPURIG_INVENTORY="$inventory" pyinfra -y inventory.py deploys/gpu_host.py
echo "== converge again: nothing left to change"
GPURIG_INVENTORY="$inventory" pyinfra -y inventory.py deploys/gpu_host.py

echo "== the result, from the host's side"
ssh -F "$(dirname "$inventory")/ssh_config" full-1 'hostname; cat /etc/security/limits.d/90-gpurig-core.conf; bash -lc "ulimit -c"'
gpurig sandbox status
echo "== done. Remove the sandbox with: .venv/bin/gpurig sandbox down"
