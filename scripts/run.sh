#!/usr/bin/env bash
# The README's main job: set up (idempotent), then a short chaos run with a
# fault on the local default cluster, ending with the verdict and store path.
# The run uses the cluster of `chaos up` if one is running; otherwise it brings
# one up itself and takes it down again, so nothing is left behind. The exit
# code is the run's: 0 valid, 1 invalid, 2 unknown, 3 error, 130 interrupted.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/setup.sh
exec "$root/.venv/bin/chaos" run --profile controller-3 --workload queue --fault random-kill \
  --time 40 --interval 10 --recovery 10 --store "$root/store"
