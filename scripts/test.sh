#!/bin/sh
# The whole test suite, as CI runs it: set-up, lint, format check, the documentation's strict
# build, unit and integration tests.
# Needs root (the integration tests build a sandbox of real SSH hosts on this machine).
set -eu
cd "$(dirname "$0")/.."
sh scripts/setup.sh
PATH="$PWD/.venv/bin:$PATH"
export PATH
ruff check .
ruff format --check .
sh scripts/docs.sh
exec pytest -q "$@"
