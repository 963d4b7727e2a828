#!/bin/sh
# The demo: a Docker host and a Podman host on a sandbox of real SSH hosts, converged,
# checked for drift, changed by hand, caught, fixed; then two compatibility verdicts.
# Needs root (the sandbox makes namespaces and containers). Runs on its own sandbox
# (`--name NAME` or $GPURIG_DEMO_SANDBOX, default `demo`), beside any other sandbox; it stays up
# afterwards: `.venv/bin/gpurig sandbox down --name demo` removes it.
set -eu
cd "$(dirname "$0")/.."
name="${GPURIG_DEMO_SANDBOX:-demo}"
if [ "${1:-}" = "--name" ]; then name="$2"; fi
began=$(date +%s)

section() { printf '\n== %s\n' "$*"; }
# expect CODE COMMAND...: run it, and stop the demo if it does not exit with CODE.
expect() {
    want=$1; shift
    set +e; "$@"; rc=$?; set -e
    if [ "$rc" -ne "$want" ]; then
        echo "demo: expected exit $want, got $rc from: $*" >&2
        exit 1
    fi
    echo "   (exit $rc, as expected)"
}
# converge STEP [pyinfra options]: pyinfra's own output goes to a log; a summary is printed.
converge() {
    step=$1; shift
    log="$DEMO_DIR/converge-$step"
    set +e
    GPURIG_INVENTORY="$INVENTORY" pyinfra -y --json "$@" inventory.py deploys/gpu_host.py \
        >"$log.json" 2>"$log.log"
    rc=$?
    set -e
    python scripts/demo_fleet.py summary "$log.json"
    echo "   (pyinfra exit $rc; its output: $log.log)"
    return "$rc"
}

section "Set-up: Debian packages, uv and the locked Python environment (.venv)"
sh scripts/setup.sh
PATH="$PWD/.venv/bin:$PATH"
PYTHONPATH="$PWD"
export PATH PYTHONPATH

section "A sandbox named '$name': two full hosts (systemd, SSH), a registry, an apt repository, a git server"
gpurig sandbox up --name "$name" --fleet 0 --full 2
eval "$(python scripts/demo_fleet.py prepare "$name")"
docker_host=$DOCKER_HOST_NAME
podman_host=$PODMAN_HOST_NAME

section "The inventory: $docker_host runs Docker, $podman_host Podman (socket + DOCKER_HOST); both the same training spec"
sed -n '/^  train:/,/^hosts:/{/^hosts:/!p;}' "$INVENTORY"
gpurig validate "$INVENTORY"

section "Converge: engine, NVIDIA toolkit (sandbox apt repository), repo with LF scripts + locked venv, secret, training container"
converge first

section "Converge again: nothing left to change"
converge second

section "Drift: read-only check of both hosts against the inventory"
expect 0 gpurig drift "$INVENTORY" --format table

section "Two mistakes by hand: stop the Podman socket; recreate the training container with a 64 MB /dev/shm"
ssh -F "$SSH_CONFIG" "$podman_host" 'systemctl stop podman.socket podman.service'
# The container's output is detached, or ssh waits on it.
ssh -F "$SSH_CONFIG" "$docker_host" "docker rm -f train >/dev/null && docker run -d --name train --shm-size 64m $IMAGE sleep infinity >/dev/null 2>&1 </dev/null"
echo "   done"

section "Drift catches both, with the fix for each"
expect 1 gpurig drift "$INVENTORY" --format table

section "The same report as Markdown, as a CI job would publish it ($DEMO_DIR/drift.md)"
expect 1 gpurig drift "$INVENTORY" --format markdown --output "$DEMO_DIR/drift.md"
cat "$DEMO_DIR/drift.md"

section "Converge refuses to recreate the running training container"
if converge refused; then
    echo "demo: the converge recreated a running container without the opt-in" >&2
    exit 1
fi
grep -m 1 'allow_recreate' "$DEMO_DIR/converge-refused.log" || true

section "Converge with the opt-in: pyinfra ... --data allow_recreate=true"
converge fixed --data allow_recreate=true

section "Drift: clean again"
expect 0 gpurig drift "$INVENTORY" --format table

section "Compat, offline: an RTX 5090 (capability 12.0) with a torch build that stops at sm_90"
# Arch list and GPU as torch printed them on a real RTX 5090 (tests/fixtures/gpu/
# torch_warning_rtx5090_sm120_journald-prefixed.txt); driver from a real RTX 5090
# (nvidia-smi_rtx5090+rtx4090_580.82.09_PARTIAL.txt).
expect 1 gpurig compat --driver 580.82.09 --arch-list sm_50,sm_60,sm_70,sm_75,sm_80,sm_86,sm_90 --capability 12.0

section "Compat: the same torch build on an H100 (capability 9.0, driver 550.90.07)"
# Driver from a real 8x H100 (tests/fixtures/gpu/nvidia-smi_h100x8_550.90.07.txt).
expect 0 gpurig compat --driver 550.90.07 --arch-list sm_50,sm_60,sm_70,sm_75,sm_80,sm_86,sm_90 --capability 9.0

section "Done in $(( $(date +%s) - began )) s. Remove the sandbox with: .venv/bin/gpurig sandbox down --name $name"
