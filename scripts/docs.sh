#!/bin/sh
# Builds the documentation site into site/ from docs/ and mkdocs.yml, strictly: a broken link, a
# missing page, or a key or finding id without its text (docs/hooks.py) fails the build.
# Needs the locked environment with the docs group (scripts/setup.sh installs it).
set -eu
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/mkdocs ]; then
    sh scripts/setup.sh
fi
NO_MKDOCS_2_WARNING=1 exec .venv/bin/mkdocs build --strict --site-dir site "$@"
