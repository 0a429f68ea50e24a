#!/usr/bin/env bash
# Live replay of one real workflow trace on two sites (SGE grid + Slurm
# slurmy, one one-slot placeholder each, data roots of their own), bound
# late (FCFS), following a HEFT plan and an AEH-ETAA one, beside the planners' model's
# prediction for the same setup (docs/policies/planners.md, "Live").
#
# Runs the sites suite's TestPlanReplayHEFTvsFCFS and prints one table.
# Usage (root, with scripts/setup.sh done; it starts SGE and Slurm):
#   flock -o /tmp/mq-sites.lock scripts/bench/planreplay.sh
# Knobs: MQ_PLAN_TRACE (the shared srasearch trace), MQ_PLAN_TIME_SCALE
# (0.02), MQ_PLAN_SIZE_SCALE (0.005).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=/usr/local/go/bin:$PATH
OUT=$(mktemp /tmp/mqplanreplay.XXXXXX.json)
trap 'rm -f "$OUT"' EXIT
cd "$ROOT"

echo "planreplay.sh: load $(cut -d' ' -f1-3 /proc/loadavg)"
export MQ_PLAN_TIME_SCALE=${MQ_PLAN_TIME_SCALE:-0.02} # the test's own default is 0.005, to be quick in CI
MQ_PLAN_OUT=$OUT go test -tags e2e ./test/sites -run 'TestPlanReplayHEFTvsFCFS$' -count=1 -v -timeout 60m 2>&1 |
	grep -E 'plan_test.go|^(--- |ok|FAIL)' || true
[ -s "$OUT" ] || { echo "planreplay.sh: the live runs wrote nothing" >&2; exit 1; }

python3 - "$OUT" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{r['trace']}: {r['tasks']} tasks, runtimes x{r['time_scale']}, sizes x{r['size_scale']}")
print("| way | live makespan (s) | live MB moved (transfers) | jobs per site | cls plan make's prediction: makespan s, MB | model, configured link: makespan s, MB | model, measured link: makespan s, MB |")
print("|---|---|---|---|---|---|---|")
for way in ("fcfs", "heft", "aeh-etaa"):
    x = r["runs"][way]
    pred = x.get("predicted") or {}
    cells = [f"{x['makespan_s']:.1f}", f"{x['bytes_moved']/1e6:.1f} ({x['transfers']})",
             ", ".join(f"{k} {v}" for k, v in sorted(x["per_site"].items())),
             f"{x['planned_makespan_s']:.1f}, {x.get('planned_bytes', 0)/1e6:.1f}" if x.get("planned_makespan_s") else "-"]
    for link in ("configured", "measured"):
        v = pred.get(link)
        cells.append(f"{v[0]:.1f}, {v[1]/1e6:.1f}" if v else "-")
    print(f"| {way} | " + " | ".join(cells) + " |")
PY
