#!/usr/bin/env bash
# The README's main job: set up (idempotent), then the smoke campaign
# (campaigns/smoke.yaml) on a local 5-node cluster: dledger-3 and controller-3
# under a master kill and a master partition, plus controller-unclean, which
# must be caught losing acknowledged messages. It ends with the summary table
# (profile x fault: verdict, lost, RTO p50/p99) and the path of index.html.
# The campaign brings its cluster up and takes it down again, so nothing is
# left behind. Exit code: 0 every gate passed, 1 a gate failed, 3 error,
# 130 interrupted (then `scripts/run.sh --resume` continues it).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/setup.sh
exec "$root/.venv/bin/chaos" campaign campaigns/smoke.yaml --store "$root/store" "$@"
