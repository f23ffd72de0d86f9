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
# Fault windows and recovery default to the profile's failure detection plus a
# margin, so the broker master kill lasts long enough for a real failover; the
# output says how many failovers the run saw.
exec "$root/.venv/bin/chaos" run --profile controller-3 --workload queue --fault leader-kill \
  --target brokers --time 50 --store "$root/store"
