#!/bin/sh
# Builds the node agent's one offline artifact for Debian and Ubuntu nodes, with Debian's own
# dpkg-deb. Usage: sh scripts/node_deb.sh DIR [PYTHON_VERSION] [PLATFORM], the targets as
# scripts/wheelhouse.sh takes them: PYTHON_VERSION the nodes' python3, 3.9 to 3.13 (e.g. 3.9
# for Debian 11; default: this machine's python3), PLATFORM x86_64, aarch64 or a manylinux tag
# (default: this machine's architecture); neither need be installed here.
# What comes out: DIR/gpurig-node_VERSION_ARCH.deb (ARCH Debian's name: amd64, arm64). It
# carries the wheelhouse (scripts/wheelhouse.sh: gpurig's wheel and its locked dependencies,
# every one checked by hash) in /usr/share/gpurig/wheels; its postinst
# makes /opt/gpurig, a venv of the node's own python3, and fills it from those wheels alone
# (no network), every file root's; /usr/lib/gpurig/ holds the SLURM Prolog and
# HealthCheckProgram wrappers and the NPD plugin config (examples/); removing the package
# removes the venv. Run it from a checkout where PyPI (or the site's mirror) is reachable.
set -eu
if [ $# -lt 1 ] || [ $# -gt 3 ] || [ -z "$1" ]; then
    echo "usage: sh scripts/node_deb.sh DIR [PYTHON_VERSION] [PLATFORM]" >&2
    exit 2
fi
mkdir -p "$1"
out=$(cd "$1" && pwd)
python=${2:-$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')}
platform=${3:-$(uname -m)}
cd "$(dirname "$0")/.."

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
sh scripts/wheelhouse.sh "$root/usr/share/gpurig/wheels" "$python" "$platform" >/dev/null
chmod 0755 "$root"
chmod 0644 "$root"/usr/share/gpurig/wheels/*
install -d -m 0755 "$root/usr/lib/gpurig" "$root/etc/gpurig" "$root/DEBIAN"
install -m 0755 examples/slurm/gpurig-prolog examples/slurm/gpurig-healthcheck "$root/usr/lib/gpurig/"
install -m 0644 examples/npd-gpurig.json "$root/usr/lib/gpurig/"

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml)
case $platform in  # wheelhouse.sh took it: x86_64, aarch64 or a manylinux tag for one
*x86_64) arch=amd64 ;;
*) arch=arm64 ;;
esac
# The wheels fit one Python minor version (compiled ones are built per version).
next="${python%.*}.$((${python#*.} + 1))"
cat >"$root/DEBIAN/control" <<EOF
Package: gpurig-node
Version: $version
Architecture: $arch
Maintainer: gpurig <gpurig@localhost>
Depends: python3 (>= $python), python3 (<< $next), python3-venv
Section: admin
Priority: optional
Description: gpurig's node agent: SLURM Prolog, HealthCheckProgram and NPD checks
 The node contracts of gpurig drift --local, in a venv at /opt/gpurig made with this node's
 python3 from the wheels in /usr/share/gpurig/wheels (no network); wrappers in /usr/lib/gpurig.
EOF
# The venv is made here, not shipped: it belongs to the node's own python3. pip runs isolated
# (no PIP_* variables or config of the admin's), from the package's wheels alone, by hash.
cat >"$root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    umask 022
    rm -rf /opt/gpurig
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin /usr/bin/python3 -I -m venv /opt/gpurig
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin /opt/gpurig/bin/python -I -m pip --isolated \
        install --quiet --no-cache-dir --no-index --find-links /usr/share/gpurig/wheels \
        --no-deps --require-hashes -r /usr/share/gpurig/wheels/requirements.txt
fi
EOF
cat >"$root/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
    rm -rf /opt/gpurig
fi
EOF
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/postrm"
deb="$out/gpurig-node_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
echo "node_deb: $deb"
