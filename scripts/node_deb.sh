#!/bin/sh
# Builds the node agent's one offline artifact for Debian and Ubuntu nodes, with Debian's own
# dpkg-deb: DIR/gpurig-node_VERSION_ARCH.deb for nodes whose python3 is PYTHON (e.g. 3.9 for
# Debian 11). It carries the wheelhouse (scripts/wheelhouse.sh DIR PYTHON: gpurig's wheel and
# its locked dependencies, every one checked by hash) in /usr/share/gpurig/wheels; its postinst
# makes /opt/gpurig, a venv of the node's own python3, and fills it from those wheels alone
# (no network), every file root's; /usr/lib/gpurig/ holds the SLURM Prolog and
# HealthCheckProgram wrappers and the NPD plugin config (examples/); removing the package
# removes the venv. Run it from the checkout after `sh scripts/setup.sh`, where PyPI is reachable.
set -eu
if [ $# -ne 2 ]; then
    echo "usage: sh scripts/node_deb.sh DIR PYTHON" >&2
    exit 2
fi
mkdir -p "$1"
out=$(cd "$1" && pwd)
python=$2
cd "$(dirname "$0")/.."

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
sh scripts/wheelhouse.sh "$root/usr/share/gpurig/wheels" "$python" >/dev/null
rm -f "$root/usr/share/gpurig/wheels/.gitignore"  # uv build's, for a checkout
chmod 0755 "$root"
chmod 0644 "$root"/usr/share/gpurig/wheels/*
install -d -m 0755 "$root/usr/lib/gpurig" "$root/etc/gpurig" "$root/DEBIAN"
install -m 0755 examples/slurm/gpurig-prolog examples/slurm/gpurig-healthcheck "$root/usr/lib/gpurig/"
install -m 0644 examples/npd-gpurig.json "$root/usr/lib/gpurig/"

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml)
arch=$(dpkg --print-architecture)
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
