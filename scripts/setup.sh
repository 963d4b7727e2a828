#!/bin/sh
# Installs what gpurig and its sandbox need on Debian 12 (as root), then the locked Python
# environment in .venv. Safe to run again: it installs only what is missing.
set -eu
cd "$(dirname "$0")/.."

# prometheus-node-exporter: tests/integration/test_node_exporter.py runs its binary on loopback.
# strace: tests/unit/test_one_reader.py traces every fact's command.
# prometheus: its promtool tests the shipped alerting rules (tests/unit/test_alert_rules.py).
DEBS="podman runc debootstrap docker-registry busybox-static gnupg iproute2 openssh-client git ca-certificates python3-venv prometheus-node-exporter strace prometheus"
missing=""
for pkg in $DEBS; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
    echo "setup: installing Debian packages:$missing"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

UV_VERSION=0.13.9
if ! command -v uv >/dev/null 2>&1; then
    if [ ! -x .tools/uv/bin/uv ]; then
        echo "setup: installing uv $UV_VERSION into .tools/uv"
        python3 -m venv .tools/uv
        .tools/uv/bin/pip install -q "uv==$UV_VERSION"
    fi
    PATH="$PWD/.tools/uv/bin:$PATH"
    export PATH
fi

# Exactly the lockfile; never a Python downloaded behind the user's back. The docs group too:
# the test command builds the documentation (scripts/docs.sh).
UV_PYTHON_DOWNLOADS=never uv sync --frozen --quiet --compile-bytecode --group docs
