#!/usr/bin/env bash
# The README's test command: set up (idempotent), then run the whole suite.
# Long chaos runs (marker `long`) run in their short form unless CHAOS_LONG=full.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/setup.sh || exit 1
export CHAOS_LONG=${CHAOS_LONG:-short}
"$root/.venv/bin/python" -m pytest "$@"
rc=$?
# pytest exits 5 when it collected no tests: that is not a pass.
if [ "$rc" -eq 5 ]; then
  echo "[test] no tests were collected" >&2
  exit 1
fi
exit "$rc"
