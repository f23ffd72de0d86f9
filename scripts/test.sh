#!/usr/bin/env bash
# The README's test command: set up (idempotent), then run the whole suite.
# Long chaos runs (marker `long`) run in their short form unless CHAOS_LONG=full.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/setup.sh || exit 1
export CHAOS_LONG=${CHAOS_LONG:-short}
pytest_run() {
  "$root/.venv/bin/python" -m pytest "$@"
  local rc=$?
  # pytest exits 5 when it collected no tests: that is not a pass.
  if [ "$rc" -eq 5 ]; then
    echo "[test] no tests were collected: pytest $*" >&2
    return 1
  fi
  return "$rc"
}
if [ "$#" -gt 0 ]; then
  pytest_run "$@"
  exit $?
fi
# The whole suite in two passes. Tests without real parts are plain Python and use one
# core each: two workers share them. Tests with real parts (clusters, JVMs, Spark, Docker, a
# browser) run one at a time, as their chaos timing assumes a machine not shared with
# another test.
unit="not cluster and not spark and not jvm and not browser and not long and not root and not docker"
pytest_run -m "$unit" -n 2
unit_rc=$?
pytest_run -m "not ($unit)"
real_rc=$?
[ "$unit_rc" -ne 0 ] && exit "$unit_rc"
exit "$real_rc"
