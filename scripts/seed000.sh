#!/usr/bin/env bash
# Seed 000 reproduced full size (docs/policies/bag-of-tasks.md): mqsim grid at 3, 15 and
# 75 MiB over SEEDS seeds with the seed's six executions, with shared
# hosts (--load 0.5, the default) and dedicated ones (--load 0), then every
# bag-of-tasks level of the traces in WFDIR. Output in OUT (default
# /tmp/seed000). Takes a few minutes on two cores.
#
# Usage: scripts/seed000.sh                   SEEDS=1-30 WFDIR=../shared/data/wfinstances
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SEEDS=${SEEDS:-1-30}
WFDIR=${WFDIR:-$ROOT/../shared/data/wfinstances}
OUT=${OUT:-/tmp/seed000}
mkdir -p "$OUT"
export PATH=/usr/local/go/bin:$PATH
go build -o "$OUT/mqsim" "$ROOT/cmd/mqsim"
"$OUT/mqsim" grid --seeds "$SEEDS" | tee "$OUT/grid-load0.5.txt"
"$OUT/mqsim" grid --seeds "$SEEDS" --load 0 | tee "$OUT/grid-load0.txt"
if [ -d "$WFDIR" ]; then
	traces=$(ls "$WFDIR"/*.json | paste -sd, -)
	"$OUT/mqsim" grid --seeds 1-5 --trace "$traces" | tee "$OUT/traces.txt"
	"$OUT/mqsim" grid --seeds 1-5 --trace "$traces" --policy fcfs,sjf,cp,sa,wqr,xsufferage | tee "$OUT/traces-all.txt"
fi
