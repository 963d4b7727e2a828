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
# suite runs as three pytest processes at once: the integration tests wait on their hosts most
# of the time (sshd, apt, systemd, SLURM's intervals), so they run as two, each with a sandbox of
# its own, beside the unit tests; each one's output follows in turn. `apart`: the modules of
# the second, chosen so that both take about as long (the SLURM cluster, the release hosts and
# the demo, about 13 minutes, with two modules moved from the first's 21). test_onboarding
# stays in the first: in the second, beside the release and SLURM hosts in its sandbox, three
# of its onboardings exited 1 within 2 s, before their preflight.
for arg in "$@"; do
  case $arg in -*) ;; *) [ ! -e "${arg%%::*}" ] || exec pytest -q "$@" ;; esac
done
apart="test_slurm.py test_releases.py test_node_py39.py test_demo.py test_user_scope.py
  test_jump.py"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pytest -q "$@" tests/unit >"$logs/unit" 2>&1 &
unit=$!
# shellcheck disable=SC2046
GPURIG_TEST_SANDBOX="${GPURIG_TEST_SANDBOX:-test}-2" \
  pytest -q "$@" $(for m in $apart; do echo "tests/integration/$m"; done) >"$logs/apart" 2>&1 &
apart_pid=$!
status=0
# shellcheck disable=SC2046
pytest -q "$@" $(for m in $apart; do echo "--ignore=tests/integration/$m"; done) \
  tests/integration || status=$?
apart_status=0
wait "$apart_pid" || apart_status=$?
echo "--- $(echo $apart) (run beside the tests above) ---"
cat "$logs/apart"
unit_status=0
wait "$unit" || unit_status=$?
echo "--- unit tests (run beside the integration tests) ---"
cat "$logs/unit"
[ "$status" -ne 0 ] || status=$apart_status
[ "$status" -ne 0 ] || status=$unit_status
exit "$status"
