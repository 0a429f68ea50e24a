#!/usr/bin/env bash
# Seed 000's bag of tasks live (job replication), set beside
# mqsim grid's prediction for the same workload (docs/policies/bag-of-tasks.md, "Live").
#
# Runs the sites suite's TestSeed000LiveVsSim: two real sites that share
# no filesystem (grid: SGE as mquser; slurmy: Slurm as mquser2, each with
# its own data root), one placeholder each, slurmy's host half as fast
# (its tasks sleep twice as long); S000_TASKS tasks, each reading its own
# S000_MIB MiB input from the CLS host, run S000_RUNS times over the same
# inputs under each policy, each policy in a fresh CLS. The test runs
# sim.RunGrid on the same tasks (two hosts of speeds 10 and 5 at two
# sites, the home link at the bandwidth that policy's live transfers
# measured) and
# this script prints both as one table.
#
# Usage (root, with scripts/setup.sh done; the suite starts SGE and Slurm):
#   flock -o /tmp/mq-sites.lock scripts/bench/seed000-live.sh
# Knobs: S000_TASKS (5), S000_MIB (4), S000_RUNS (2),
# S000_POLICIES (wqr,sa,xsufferage).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=/usr/local/go/bin:$PATH
OUT=$(mktemp -d /tmp/mqs000.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
cd "$ROOT"

export S000_RUNS=${S000_RUNS:-2} # the test's own default is 1, to be quick in CI
echo "seed000-live.sh: ${S000_TASKS:-5} tasks x ${S000_MIB:-4} MiB, $S000_RUNS executions; load $(cut -d' ' -f1-3 /proc/loadavg)"
S000_OUT=$OUT go test -tags e2e ./test/sites -run 'TestSeed000LiveVsSim$' -count=1 -v -timeout 60m 2>&1 |
	grep -E '^(--- |ok|FAIL)' || true
[ -s "$OUT/live.json" ] || { echo "seed000-live.sh: the live runs wrote nothing" >&2; exit 1; }

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
live, sim = json.load(open(f"{out}/live.json")), json.load(open(f"{out}/sim.json"))
print("| policy | makespan live / mqsim (s) | per execution live / mqsim (s) | MiB moved live / mqsim | copies killed live / mqsim | CPU waste live / mqsim | network waste live / mqsim |")
print("|---|---|---|---|---|---|---|")
for p in live:
    l, s = live[p], sim[p]
    per = lambda r: ", ".join(f"{m:.1f}" for m in r["makespans_s"])
    print(f"| {p} | {l['makespan_s']:.1f} / {s['makespan_s']:.1f} | {per(l)} / {per(s)} | "
          f"{l['bytes_moved']/2**20:.0f} / {s['bytes_moved']/2**20:.0f} | {l['copies']} / {s['copies']} | "
          f"{100*l['cpu_waste']:.0f}% / {100*s['cpu_waste']:.0f}% | {100*l['net_waste']:.0f}% / {100*s['net_waste']:.0f}% |")
print("\nhome link in mqsim, per policy (its live run's transfers): " +
      ", ".join(f"{p} {live[p].get('rate_Bps', 0)/2**20:.1f} MiB/s" for p in live))
PY
