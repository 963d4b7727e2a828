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
# Tests named on the command line (a file, a directory, a test's id) run as asked. The whole
# suite runs as two pytest processes at once: the integration tests wait on their hosts most of
# the time (sshd, apt, systemd, SLURM's intervals), which leaves a core to the unit tests; the
# unit tests' output follows.
for arg in "$@"; do
  case $arg in -*) ;; *) [ ! -e "${arg%%::*}" ] || exec pytest -q "$@" ;; esac
done
unit_log=$(mktemp)
trap 'rm -f "$unit_log"' EXIT
pytest -q "$@" tests/unit >"$unit_log" 2>&1 &
unit=$!
status=0
pytest -q "$@" tests/integration || status=$?
unit_status=0
wait "$unit" || unit_status=$?
echo "--- unit tests (run beside the integration tests) ---"
cat "$unit_log"
[ "$status" -ne 0 ] || status=$unit_status
exit "$status"
