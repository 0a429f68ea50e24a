#!/usr/bin/env bash
# Seed 002 reproduced full size (docs/policies/dbc.md): mqsim econ over the
# seed's 8 deadlines x 18 budgets for cost, cost-time and time
# optimisation, the same sweep with the jobs per resource, and seeds 1-5 at
# budget 22,000 (Figures 7 and 8) to show the job lengths drawn do not
# matter. Output in OUT (default /tmp/seed002). Takes seconds.
#
# Usage: scripts/seed002.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/seed002}
mkdir -p "$OUT"
export PATH=/usr/local/go/bin:$PATH
go build -o "$OUT/mqsim" "$ROOT/cmd/mqsim"
"$OUT/mqsim" econ | tee "$OUT/sweep.txt"
"$OUT/mqsim" econ --strategy cost,costtime --by-resource > "$OUT/by-resource.txt"
for s in 1 2 3 4 5; do
	"$OUT/mqsim" econ --strategy cost,costtime --budget 22000 --seed "$s" --json
done > "$OUT/budget22000.jsonl"
