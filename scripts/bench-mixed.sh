#!/usr/bin/env bash
# The mixed bag (BENCHMARKS.md, "Resources per job"): MIXED_JOBS jobs of 1,
# 2, 4 and 8 cores (`mqsub -f`, `"cpus"` per line, each size equally likely)
# running `sleep` of seeded lengths (uniform in MIXED_MIN_S..MIXED_MAX_S,
# 0.25-1.75 s: 2,000 jobs take about two minutes) on the CLS's own
# placeholders, `cls serve --local MIXED_PH --slots MIXED_CORES` (4 of 16
# cores: 64). Everything is submitted at once, in one bulk, under the
# default queue's FCFS; the script waits for every job to end, then reads
# each job's own stamps from `mqstat --json` (submitted, started and
# finished, the CLS's clock, microseconds; its cores from its request)
# and prints:
#
#   util   cores busy over the cores there until the queue empties: the
#          integral over time of the cores held by running jobs (each job
#          holds its cores from its start to its finish) from the first
#          start to the last start (the moment the last job left the queue;
#          after it no scheduler can fill the placeholders), divided by
#          cores x that span. util_all is the same to the last finish.
#   fair   each job's wait (start - submitted) against its fair share: the
#          wait a 1-core job submitted at the same moment, at the same
#          place in the order, would have had under strict FCFS on the same
#          placeholders with the same jobs (their measured run times) ahead
#          of it: the first time, no earlier than the start of the job
#          before it, that one core is free, in a replay of the jobs in
#          submission order where each starts, on the first placeholder
#          where its cores are free, no earlier than the one before it.
#          A fair share under MIXED_FLOOR_S (1 s, a job's length: the jobs
#          dispatched at once have none) counts as MIXED_FLOOR_S.
#          ratio = wait / fair share; the max and the 99th percentile are
#          printed, with the worst job and the ratio's max per size.
#
# Targets: util >= 0.90, max ratio <= 3.
#
# Usage: scripts/bench-mixed.sh            (2,000 jobs, 1-3 min on a quiet machine)
#        MIXED_JOBS=400 scripts/bench-mixed.sh
# Knobs: MIXED_JOBS (2000), MIXED_SEED (1), MIXED_PH (4), MIXED_CORES (16),
# MIXED_MIN_S (0.25), MIXED_MAX_S (1.75), MIXED_FLOOR_S (1), MIXED_BIN (use
# these binaries), MIXED_KEEP (a directory to keep the jobs' JSON in).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
JOBS=${MIXED_JOBS:-2000}
SEED=${MIXED_SEED:-1}
PH=${MIXED_PH:-4}
CORES=${MIXED_CORES:-16}
MIN_S=${MIXED_MIN_S:-0.25}
MAX_S=${MIXED_MAX_S:-1.75}
FLOOR_S=${MIXED_FLOOR_S:-1}
if ! [[ $JOBS =~ ^[1-9][0-9]*$ && $PH =~ ^[1-9][0-9]*$ && $CORES =~ ^[1-9][0-9]*$ ]] || ((CORES < 8)); then
	echo "bench-mixed: MIXED_JOBS and MIXED_PH must be positive integers, MIXED_CORES at least 8" >&2
	exit 2
fi
num='^[0-9]+([.][0-9]+)?$'
if ! [[ $MIN_S =~ $num && $MAX_S =~ $num && $FLOOR_S =~ $num && $SEED =~ ^[0-9]+$ ]] || [ "$(echo "$MIN_S <= $MAX_S && $FLOOR_S > 0" | bc)" != 1 ]; then
	echo "bench-mixed: MIXED_MIN_S <= MIXED_MAX_S and MIXED_FLOOR_S > 0 must be seconds, MIXED_SEED an integer" >&2
	exit 2
fi
command -v python3 >/dev/null || { echo "bench-mixed: python3 is needed for the figures" >&2; exit 1; }

WORK=$(mktemp -d /tmp/mqmixed.XXXXXX) # short: MQ_HOME holds a Unix socket
CLS=
cleanup() {
	if [ -n "$CLS" ]; then
		kill "$CLS" 2>/dev/null || true
		wait "$CLS" 2>/dev/null || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
if [ -n "${MIXED_BIN:-}" ]; then
	BIN=$MIXED_BIN
else
	BIN=$WORK/bin
	(cd "$ROOT" && PATH=/usr/local/go/bin:$PATH go build -o "$BIN/" ./cmd/cls ./cmd/mqsub ./cmd/mqstat)
fi
export PATH=$BIN:$PATH
export MQ_HOME=$WORK/home
mkdir -p "$MQ_HOME"

# The jobs: seeded sizes and lengths, one job-file line each.
python3 - "$JOBS" "$SEED" "$MIN_S" "$MAX_S" >"$WORK/jobs.jsonl" <<'EOF'
import json, random, sys
n, seed, lo, hi = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
rng = random.Random(seed)
for i in range(n):
    cpus = rng.choice((1, 2, 4, 8))
    secs = round(rng.uniform(lo, hi), 2)
    print(json.dumps({"target": "mixed.%d" % i, "command": "sleep %.2f" % secs, "cpus": cpus}))
EOF

cls serve --local "$PH" --slots "$CORES" --sync normal >"$WORK/cls.log" 2>&1 &
CLS=$!
for _ in $(seq 600); do
	mqstat --summary >/dev/null 2>&1 && break
	kill -0 "$CLS" 2>/dev/null || { echo "bench-mixed: cls serve exited:" >&2; tail -5 "$WORK/cls.log" >&2; exit 1; }
	sleep 0.1
done
# The placeholders connect before the work arrives.
for i in $(seq 600); do
	((i < 600)) || { echo "bench-mixed: the $PH placeholders did not connect" >&2; exit 1; }
	[ "$(cls site list --json 2>/dev/null | python3 -c 'import json,sys; print(sum(s.get("connected",0) for s in json.load(sys.stdin)["sites"]))' 2>/dev/null)" = "$PH" ] && break
	sleep 0.1
done

load0=$(cut -d' ' -f1 /proc/loadavg)
t0=$(date +%s.%N)
mqsub -f "$WORK/jobs.jsonl" >/dev/null
until [ "$(mqstat -s WQE | wc -l)" -le 1 ]; do sleep 1; done
t1=$(date +%s.%N)
load1=$(cut -d' ' -f1 /proc/loadavg)
mqstat --json >"$WORK/done.json"
if [ -n "${MIXED_KEEP:-}" ]; then
	mkdir -p "$MIXED_KEEP"
	cp "$WORK/done.json" "$WORK/jobs.jsonl" "$MIXED_KEEP/"
fi

echo "== mixed bag: $JOBS jobs of 1/2/4/8 cores, sleep ${MIN_S}-${MAX_S} s (seed $SEED), $PH placeholders x $CORES cores, $(nproc) CPUs, load $load0 -> $load1"
printf 'submit to all ended: %.1f s\n' "$(echo "$t1 - $t0" | bc)"
python3 - "$WORK/done.json" "$PH" "$CORES" "$FLOOR_S" <<'EOF'
import json, sys
from datetime import datetime

path, ph, cores, floor = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
raw = json.load(open(path))
jobs = raw if isinstance(raw, list) else raw.get("jobs", raw)
def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
js = []
for j in jobs:
    if j["state"] != "D":
        sys.exit("bench-mixed: job %d ended %s, not Done: %s" % (j["id"], j["state"], j.get("reason", "")))
    js.append(dict(id=j["id"], cpus=max(j.get("cpus", 1), 1), sub=ts(j["submitted"]),
                   start=ts(j["started"]), end=ts(j["finished"])))
js.sort(key=lambda j: j["id"])
total = ph * cores

# util: busy cores integrated over [first start, last start] (and to the last finish).
first = min(j["start"] for j in js)
last_start = max(j["start"] for j in js)
last_end = max(j["end"] for j in js)
def busy(a, b):
    return sum(j["cpus"] * max(0.0, min(j["end"], b) - max(j["start"], a)) for j in js)
util = busy(first, last_start) / (total * (last_start - first)) if last_start > first else 0.0
util_all = busy(first, last_end) / (total * (last_end - first))
peak = max(sum(j["cpus"] for j in js if j["start"] <= t < j["end"]) for t in (k["start"] for k in js))

# fair share: strict FCFS replay in submission order with the measured run times.
running = [[] for _ in range(ph)]  # per placeholder: [end, cpus] of jobs placed
def earliest(c, not_before):
    """First time >= not_before some placeholder has c cores free, and which."""
    best = None
    for p, rs in enumerate(running):
        live = sorted(r for r in rs if r[0] > not_before)
        free = cores - sum(r[1] for r in live)
        t = not_before
        for end, cp in live:
            if free >= c:
                break
            free += cp
            t = end
        if free >= c and (best is None or t < best[0]):
            best = (t, p)
    return best
prev = float("-inf")
ratios = []
for j in js:
    nb = max(prev, j["sub"])
    one, _ = earliest(1, nb)
    fair = max(one - j["sub"], floor)
    wait = j["start"] - j["sub"]
    ratios.append((wait / fair, j, wait, fair))
    t, p = earliest(j["cpus"], nb)
    running[p] = [r for r in running[p] if r[0] > t] + [[t + (j["end"] - j["start"]), j["cpus"]]]
    prev = t
ratios.sort(key=lambda r: r[0])
worst = ratios[-1]
p99 = ratios[min(len(ratios) - 1, int(0.99 * len(ratios)))][0]
print("util (first start to last start, %.1f s): %.3f   util_all (to last finish, %.1f s): %.3f   peak busy cores %d of %d"
      % (last_start - first, util, last_end - first, util_all, peak, total))
print("wait / fair share: max %.2f (job %d, %d cores, waited %.1f s, fair %.1f s)   p99 %.2f"
      % (worst[0], worst[1]["id"], worst[1]["cpus"], worst[2], worst[3], p99))
for c in (1, 2, 4, 8):
    rs = [r for r in ratios if r[1]["cpus"] == c]
    if rs:
        print("  %d cores: %4d jobs, max ratio %.2f, mean wait %.1f s" % (c, len(rs), max(r[0] for r in rs), sum(r[2] for r in rs) / len(rs)))
EOF
