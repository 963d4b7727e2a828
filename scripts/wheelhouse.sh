#!/bin/sh
# Builds the wheelhouse a node installs gpurig from without reaching PyPI (README: Installing
# gpurig on a node): gpurig's wheel (built by the backend pinned by hash in
# build-constraints.txt), its locked runtime dependencies as wheels checked against uv.lock's
# hashes, and one requirements.txt with every wheel's hash, gpurig's too, all in DIR. Run it from the checkout after
# `sh scripts/setup.sh`, where PyPI (or the site's mirror) is reachable; the wheels fit nodes
# with this machine's architecture and Python version, or with PYTHON (e.g. 3.9: the node's
# python3), for which only the dependencies pyproject installs there are taken (below 3.11,
# the node agent's: gpurig/node/floor.py).
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: sh scripts/wheelhouse.sh DIR [PYTHON]" >&2
    exit 2
fi
target=${2:-}
mkdir -p "$1"
out=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."

# uv as the user has it, else where setup.sh put it.
PATH="$PATH:$PWD/.tools/uv/bin"
if ! command -v uv >/dev/null 2>&1; then
    echo "wheelhouse: uv not found: run sh scripts/setup.sh first" >&2
    exit 1
fi
export UV_PYTHON_DOWNLOADS=never

rm -f "$out"/gpurig-*.whl
uv build --quiet --wheel --out-dir "$out" --require-hashes \
    --build-constraints scripts/build-constraints.txt
uv export --quiet --frozen --no-dev --no-emit-project --format requirements-txt \
    -o "$out/requirements.txt"
# pip downloads by hash; a throwaway venv brings its own pip (python3-venv, setup.sh's).
pip=$(mktemp -d)
trap 'rm -rf "$pip"' EXIT
python3 -m venv "$pip"
set --
if [ -n "$target" ]; then
    .venv/bin/python scripts/requirements_for.py "$out/requirements.txt" "$target"
    arch=$(uname -m)
    set -- --python-version "$target" --implementation cp --abi "cp$(echo "$target" | tr -d .)" \
        --platform "manylinux2014_$arch" --platform "manylinux_2_28_$arch"
fi
"$pip/bin/pip" download --quiet --no-deps --require-hashes --only-binary :all: "$@" \
    -r "$out/requirements.txt" -d "$out"
# gpurig's own wheel, by the hash of the file just built: installed with the others, checked.
for wheel in "$out"/gpurig-*.whl; do
    version=$(basename "$wheel" | cut -d- -f2)
    echo "gpurig==$version --hash=sha256:$(sha256sum "$wheel" | cut -c1-64)" >>"$out/requirements.txt"
done
echo "wheelhouse: $out: $(ls "$out"/*.whl | wc -l) wheels and requirements.txt"
