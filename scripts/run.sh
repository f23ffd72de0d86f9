#!/usr/bin/env bash
# The README's main job: set up (idempotent), then a short chaos run with a
# fault on the local default cluster, ending with the verdict and store path.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/setup.sh
chaos="$root/.venv/bin/chaos"
cleanup() { "$chaos" down >/dev/null 2>&1 || true; }
trap cleanup EXIT
"$chaos" up --nodes 5
"$chaos" nodes
"$chaos" down
trap - EXIT
