#!/bin/sh
# The whole test suite, as CI runs it: set-up, lint, format check, the documentation's strict
# build, unit and integration tests.
# Needs root (the integration tests build a sandbox of real SSH hosts on this machine).
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
PATH="$PWD/.venv/bin:$PATH"
# uv where setup put it (when the machine has none): the lockfile tests install with it.
if ! command -v uv >/dev/null 2>&1 && [ -x .tools/uv/bin/uv ]; then PATH="$PATH:$PWD/.tools/uv/bin"; fi
export PATH
ruff check .
ruff format --check .
sh scripts/docs.sh
exec pytest -q "$@"
