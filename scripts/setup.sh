#!/bin/sh
# Installs what gpurig and its sandbox need on Debian 12 (as root), then the locked Python
# environment in .venv. Safe to run again: it installs only what is missing.
set -eu
cd "$(dirname "$0")/.."

# prometheus-node-exporter: tests/integration/test_node_exporter.py runs its binary on loopback.
# strace: tests/unit/test_one_reader.py traces every fact's command.
# prometheus: its promtool tests the shipped alerting rules (tests/unit/test_alert_rules.py).
# pipx: tests/unit/test_tool_install.py installs the wheelhouse with it, as the docs tell users.
DEBS="podman runc debootstrap docker-registry busybox-static gnupg iproute2 openssh-client git ca-certificates python3-venv prometheus-node-exporter strace prometheus pipx"
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

# The locked dependencies' wheels (scripts/wheelhouse.sh), once per lockfile, in the user's cache:
# tests/unit/test_tool_install.py builds a wheelhouse from them with no network, as a site
# without PyPI would from its mirror, and installs it with `uv tool` and pipx.
wheels="${XDG_CACHE_HOME:-$HOME/.cache}/gpurig/wheelhouse-$(sha256sum uv.lock | cut -c1-12)"
if [ ! -f "$wheels/requirements.txt" ]; then
    echo "setup: downloading the locked wheels into $wheels"
    rm -rf "$wheels.part"
    sh scripts/wheelhouse.sh "$wheels.part" >/dev/null
    mv "$wheels.part" "$wheels"
fi
# The same for another target, CPython 3.12 on aarch64: tests/unit/test_wheelhouse.py builds
# that wheelhouse from them with no network and no such Python or machine here.
if [ ! -f "$wheels-3.12-aarch64/requirements.txt" ]; then
    echo "setup: downloading the locked wheels for CPython 3.12 on aarch64 into $wheels-3.12-aarch64"
    rm -rf "$wheels-3.12-aarch64.part"
    sh scripts/wheelhouse.sh "$wheels-3.12-aarch64.part" 3.12 aarch64 >/dev/null
    mv "$wheels-3.12-aarch64.part" "$wheels-3.12-aarch64"
fi

# The build backend's wheels (scripts/build-constraints.txt), once per pin, in the user's cache:
# tests/unit/test_install_page.py builds gpurig from a git URL with pipx, whose pip fetches the
# backend as a site's mirror would serve it.
build="${XDG_CACHE_HOME:-$HOME/.cache}/gpurig/build-$(sha256sum scripts/build-constraints.txt | cut -c1-12)"
if [ ! -d "$build" ]; then
    echo "setup: downloading the build backend's wheels into $build"
    rm -rf "$build.part" "$build.pip"
    python3 -m venv "$build.pip"
    "$build.pip/bin/pip" download --quiet --no-deps --require-hashes --only-binary :all: \
        -r scripts/build-constraints.txt -d "$build.part"
    rm -rf "$build.pip"
    mv "$build.part" "$build"
fi

# uv and pipx as wheels, once per version, in the user's cache: tests/integration/
# test_user_install.py installs them as a plain account on a sandbox host with no index, and
# gpurig from a wheelhouse with each, as the install page says.
PIPX_VERSION=1.18.4
tools="${XDG_CACHE_HOME:-$HOME/.cache}/gpurig/tools-uv$UV_VERSION-pipx$PIPX_VERSION"
if [ ! -d "$tools" ]; then
    echo "setup: downloading uv's and pipx's wheels into $tools"
    rm -rf "$tools.part" "$tools.pip"
    python3 -m venv "$tools.pip"
    "$tools.pip/bin/pip" download --quiet --only-binary :all: -d "$tools.part" \
        "uv==$UV_VERSION" "pipx==$PIPX_VERSION"
    rm -rf "$tools.pip"
    mv "$tools.part" "$tools"
fi
