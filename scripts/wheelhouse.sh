#!/bin/sh
# Builds the wheelhouse a node installs gpurig from without reaching PyPI (README: Installing
# gpurig on a node; docs/install.md). Usage: sh scripts/wheelhouse.sh DIR [PYTHON_VERSION] [PLATFORM]
#
# What comes out, in DIR (its earlier wheels and requirements.txt replaced):
#   - gpurig's wheel, built by the backend pinned by hash in scripts/build-constraints.txt;
#   - its locked runtime dependencies, binary wheels only, each checked against uv.lock's
#     hashes as it is downloaded;
#   - requirements.txt: every wheel in DIR as NAME==VERSION with that file's sha256, gpurig's
#     too, for `pip install --no-index --find-links DIR --no-deps --require-hashes -r ...`.
#
# Targets (Linux, CPython):
#   - DIR alone: this machine's python3 and architecture, as pip here sees them;
#   - PYTHON_VERSION, 3.9 to 3.13: a node's python3, which need not be installed here; only the
#     dependencies pyproject installs on it are taken (below 3.11, the node agent's:
#     gpurig/node/floor.py);
#   - PLATFORM (after PYTHON_VERSION; default: this machine's architecture): x86_64 or aarch64,
#     meaning manylinux_2_28 (glibc 2.28 and newer: RHEL 8, Debian 10, Ubuntu 20.04 and
#     later), or a full manylinux tag for another glibc floor (manylinux_2_31_aarch64,
#     manylinux2014_x86_64). A wheel for that tag or an older manylinux one fits; a dependency
#     without one is named (NAME==VERSION) with the tags wanted, and DIR is left as it was.
#
# Needs python3 with its venv module (Debian: python3-venv): pip downloads for any target from
# a venv of its own, made once per python3 in ~/.cache/gpurig/pip-VERSION (nothing is installed
# into it). And uv: on PATH, else .venv/bin/uv, else .tools/uv/bin/uv (scripts/setup.sh's),
# else this installs it for this account only (the version setup.sh pins, with pip, into a venv
# in ~/.cache/gpurig/uv-VERSION; no root, no system package) and says so. PyPI or the site's
# mirror must be reachable, as pip's and uv's own settings say (PIP_INDEX_URL, PIP_FIND_LINKS,
# UV_INDEX_URL, ...).
set -eu
usage() {
    echo "usage: sh scripts/wheelhouse.sh DIR [PYTHON_VERSION] [PLATFORM]" >&2
    echo "  PYTHON_VERSION: 3.9 to 3.13; PLATFORM: x86_64, aarch64 or a manylinux tag" \
        "(manylinux_2_28_aarch64)" >&2
    exit 2
}
if [ $# -lt 1 ] || [ $# -gt 3 ] || [ -z "$1" ]; then
    usage
fi
python=${2:-}
platform=${3:-}
if [ -z "$python" ] && [ -n "$platform" ]; then
    python=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
fi
case $python in
"" | 3.9 | 3.10 | 3.11 | 3.12 | 3.13) ;;
*)
    echo "wheelhouse: PYTHON_VERSION $python: not one of 3.9 to 3.13" >&2
    exit 2
    ;;
esac
if [ -n "$python" ] && [ -z "$platform" ]; then
    platform=$(uname -m)
fi

# The manylinux platforms a wheel may name: the target's glibc floor and every older one.
glibc=""
case $platform in
"") ;;
x86_64 | aarch64) arch=$platform glibc=28 ;;
manylinux2014_x86_64 | manylinux2014_aarch64) arch=${platform#manylinux2014_} glibc=17 ;;
manylinux_2_*_x86_64) arch=x86_64 glibc=${platform#manylinux_2_} glibc=${glibc%_x86_64} ;;
manylinux_2_*_aarch64) arch=aarch64 glibc=${platform#manylinux_2_} glibc=${glibc%_aarch64} ;;
*) glibc=bad ;;
esac
oldest=17
if [ "${arch:-}" = x86_64 ]; then
    oldest=5
fi
case $platform:$glibc in
?*: | *:*[!0-9]*)
    echo "wheelhouse: PLATFORM $platform: not x86_64, aarch64 or a manylinux tag" \
        "(manylinux_2_28_aarch64, manylinux2014_x86_64)" >&2
    exit 2
    ;;
esac
if [ -n "$glibc" ] && [ "$glibc" -lt "$oldest" ]; then
    echo "wheelhouse: PLATFORM $platform: no manylinux tag for $arch before manylinux_2_${oldest}" >&2
    exit 2
fi

mkdir -p "$1"
out=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."

# uv as the user has it, else the checkout's, else one installed for this account.
if command -v uv >/dev/null 2>&1; then
    uv=uv
elif [ -x .venv/bin/uv ]; then
    uv=$PWD/.venv/bin/uv
elif [ -x .tools/uv/bin/uv ]; then
    uv=$PWD/.tools/uv/bin/uv
else
    version=$(sed -n 's/^UV_VERSION=//p' scripts/setup.sh)
    home="${XDG_CACHE_HOME:-$HOME/.cache}/gpurig/uv-$version"
    uv=$home/bin/uv
    if [ ! -x "$uv" ]; then
        echo "wheelhouse: uv not found (PATH, .venv/bin, .tools/uv/bin): installing uv $version" \
            "for this account into $home" >&2
        rm -rf "$home"
        mkdir -p "$(dirname "$home")"
        python3 -m venv "$home"
        "$home/bin/pip" install --quiet "uv==$version"
    fi
fi
export UV_PYTHON_DOWNLOADS=never

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$uv" build --quiet --wheel --out-dir "$work/gpurig" --require-hashes \
    --build-constraints scripts/build-constraints.txt
"$uv" export --quiet --frozen --no-dev --no-emit-project --format requirements-txt \
    -o "$work/locked.txt"
# pip downloads by hash, for any target, from a venv of its own (and lends requirements_for.py
# the `packaging` it carries, in a checkout without .venv): made once per python3 in the user's
# cache, where nothing is ever installed into it.
pip="${XDG_CACHE_HOME:-$HOME/.cache}/gpurig/pip-$(python3 -c 'import sys; print(sys.version.split()[0])')"
if ! "$pip/bin/python" -m pip --version >/dev/null 2>&1; then
    rm -rf "$pip"
    mkdir -p "$(dirname "$pip")"
    python3 -m venv "$work/pip"
    mv -T "$work/pip" "$pip" 2>/dev/null || pip=$work/pip  # another run's came first
fi
pip=$pip/bin/python
set -- --no-deps --require-hashes --only-binary :all:
# What installs on the target's Python and machine, markers judged here: one wheel a line.
"$pip" scripts/requirements_for.py "$work/locked.txt" \
    "${python:-$("$pip" -c 'import sys; print("%d.%d" % sys.version_info[:2])')}" \
    "${arch:-$(uname -m)}"
if [ -n "$python" ]; then
    set -- "$@" --python-version "$python" --implementation cp --abi "cp$(echo "$python" | tr -d .)"
    n=$glibc
    while [ "$n" -ge "$oldest" ]; do
        set -- "$@" --platform "manylinux_2_${n}_$arch"
        n=$((n - 1))
    done
    [ "$glibc" -lt 17 ] || set -- "$@" --platform "manylinux2014_$arch"
    [ "$arch" != x86_64 ] || [ "$glibc" -lt 12 ] || set -- "$@" --platform manylinux2010_x86_64
    [ "$arch" != x86_64 ] || set -- "$@" --platform manylinux1_x86_64
    target="CPython $python on manylinux_2_${glibc}_$arch"
    abi3=$(echo "$python" | cut -d. -f2)
    wanted="cp$(echo "$python" | tr -d .)-cp$(echo "$python" | tr -d .), cp3N-abi3 (N <= $abi3)"
    wanted="$wanted or py3-none, for manylinux_2_${glibc}_$arch or an older manylinux"
    wanted="$wanted (down to manylinux_2_${oldest}_$arch), or any platform"
else
    here=$("$pip" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    target="this machine's python3 ($here, $(uname -m))"
    wanted="those pip accepts here (python3 -m pip debug --verbose lists them)"
fi

# One pip run for every wheel; where one has no wheel for the target, each run names the first
# it meets: it is set aside and the run repeated, so that every missing one is named at once.
missing=""
while ! "$pip" -m pip download --quiet "$@" -r "$work/locked.txt" -d "$work/wheels" \
    2>"$work/pip.err"; do
    absent=$(sed -n 's/^ERROR: No matching distribution found for \([^ ]*\)$/\1/p' "$work/pip.err")
    if [ -z "$absent" ] || ! grep -q "^$absent " "$work/locked.txt"; then
        cat "$work/pip.err" >&2
        exit 1
    fi
    missing="$missing  $absent
"
    # Its requirement line and the hash lines under it, out.
    awk -v gone="$absent" '/^[^ ]/ { skip = index($0, gone " ") == 1 } !skip' \
        "$work/locked.txt" >"$work/rest.txt"
    mv "$work/rest.txt" "$work/locked.txt"
done
cat "$work/pip.err" >&2
locked=$(grep -c '^[^ #]' "$work/locked.txt" || true)
if [ -n "$missing" ]; then
    count=$(printf '%s' "$missing" | grep -c .)
    {
        echo "wheelhouse: no wheel for $target for $count of $((locked + count)) locked dependencies:"
        printf '%s' "$missing"
        echo "wanted tags: $wanted"
        echo "Add them to the index or find-links pip reads here (pip's config, PIP_FIND_LINKS)."
    } >&2
    exit 1
fi

# requirements.txt: each wheel by its own file's hash (pip checked it against uv.lock's).
for wheel in "$work"/wheels/*.whl "$work"/gpurig/gpurig-*.whl; do
    file=${wheel##*/}
    rest=${file#*-}
    echo "${file%%-*}==${rest%%-*} --hash=sha256:$(sha256sum "$wheel" | cut -c1-64)"
done >"$work/requirements.txt"
wheels=$(grep -c . "$work/requirements.txt")
if [ "$wheels" -ne $((locked + 1)) ]; then
    echo "wheelhouse: $((wheels - 1)) wheels downloaded for $locked locked dependencies" >&2
    exit 1
fi
rm -f "$out"/*.whl "$out/requirements.txt"
mv "$work"/wheels/*.whl "$work"/gpurig/gpurig-*.whl "$out/"
mv "$work/requirements.txt" "$out/requirements.txt"
echo "wheelhouse: $out: $wheels wheels for $target, and requirements.txt"
