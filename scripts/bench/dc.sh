#!/usr/bin/env bash
# Live FCFS vs DC on two real sites, set beside mqsim's prediction for the
# same workload (BENCHMARKS.md, "FCFS vs DC, live and simulated").
#
# Runs the sites suite's TestStagingDCMovesLessThanFCFS larger: DC_JOBS
# jobs, each reading its own DC_MIB MiB input that lives only at the SGE
# site grid (account mquser) and running DC_RUN_S s; the Slurm site slurmy
# (account mquser2, its own data root) can run any job once its input is
# staged there. With DC_SHAPE=pa the workload is the thesis's PA pipeline
# with inflated files instead, sim.PA's (seed 1): DC_JOBS pipelines, each a
# BLAST-like job reading a 250-850 B sequence file that exists only on the
# CLS host and writing, after 2-8 s, a homologue file of 5,000-85,000 B
# times DC_INFLATE, then a parsing job reading it for 0.5-0.7 s, either
# stage at either site (mqsim: the same jobs and files, the sequence files
# outside the sites).
# One placeholder per site, both up before the workload
# arrives; once under FCFS, once under DC, each in a fresh CLS. Then runs
# mqsim on the same workload (2 hosts, the inputs on host 0) on two
# platforms: "configured", the link the live DC priced transfers with
# (cls serve's default --site-net for a site: 0.5 s, 10 MB/s, and 0.5 s
# one way to the CLS), and "measured", fitted to the FCFS run's own
# transfers (loopback SFTP), with a 10 ms round trip to the CLS; both with
# the thesis's staging (--staging inline: a placeholder copies its job's
# inputs within its turn) and with the live CLS's (--staging live: the
# CLS copies beside the jobs and keeps replicas). Prints one table.
# DC_FROM=DIR runs mqsim and the table again on what an earlier run kept
# in DIR (DC_KEEP=DIR).
#
# Usage (root, with scripts/setup.sh done; it starts SGE and Slurm):
#   flock /tmp/mq-sites.lock scripts/bench/dc.sh
# Knobs: DC_SHAPE (bag; or pa), DC_JOBS (24), DC_MIB (32, bag only),
# DC_RUN_S (3, bag only), DC_INFLATE (100, pa only), DC_SEEDS (1-5),
# DC_KEEP (a directory to keep the CLS logs' staging lines, the live
# results, mqsim's workload and platforms and its runs in).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PATH=/usr/local/go/bin:$PATH
JOBS=${DC_JOBS:-24}
MIB=${DC_MIB:-32}
RUN_S=${DC_RUN_S:-3}
SHAPE=${DC_SHAPE:-bag}
INFLATE=${DC_INFLATE:-100}
SEEDS=${DC_SEEDS:-1-5}
cd "$ROOT"
if [ -n "${DC_FROM:-}" ]; then
	# mqsim and the table again on a DC_KEEP directory of an earlier run.
	OUT=$(mktemp -d /tmp/mqdc.XXXXXX)
	trap 'rm -rf "$OUT"' EXIT
	cp "$DC_FROM"/live.json "$DC_FROM"/workload.json "$DC_FROM"/measured.json "$OUT"/
	unset DC_KEEP
else
OUT=$(mktemp -d /tmp/mqdc.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

if [ "$SHAPE" = pa ]; then
	echo "dc.sh: PA, $JOBS pipelines, homologue files inflated $INFLATE times; load $(cut -d' ' -f1-3 /proc/loadavg)"
else
	echo "dc.sh: $JOBS jobs x $MIB MiB inputs at grid, $RUN_S s each; load $(cut -d' ' -f1-3 /proc/loadavg)"
fi
MQ_DC_SHAPE=$SHAPE MQ_DC_JOBS=$JOBS MQ_DC_MIB=$MIB MQ_DC_RUN_S=$RUN_S MQ_DC_INFLATE=$INFLATE MQ_DC_OUT=$OUT \
	go test -tags e2e ./test/sites -run 'TestStagingDCMovesLessThanFCFS$' -count=1 -v -timeout 60m 2>&1 |
	grep -E 'dc_test.go|^(--- |ok|FAIL)' || true
[ -s "$OUT/live.json" ] || { echo "dc.sh: the live runs wrote nothing" >&2; exit 1; }
# DC's staging decisions, each with the placeholder arrivals it expected.
if [ -s "$OUT/dc-log.txt" ]; then
	echo "dc: $(grep -c 'dc: staging' "$OUT/dc-log.txt" || true) staging decisions:"
	grep 'dc: staging' "$OUT/dc-log.txt" | sed -E 's/.*(job=[0-9]+).*(queue_s=[0-9.]+).*(arrivals=.*)$/  \1 \2 \3/' || true
fi
fi
go build -o "$OUT/mqsim" ./cmd/mqsim

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
m = json.load(open(f"{out}/measured.json"))
# The FCFS run's own transfers: small ones (<= 64 KiB) give the per-file
# latency, big ones the bandwidth beyond it.
each = m.get("each") or []
small = sorted(s for b, s in each if b <= 64 << 10)
big = [(b, s) for b, s in each if b > 64 << 10]
lat = small[len(small) // 2] if small else 0.01
rate = 100e6  # no big transfer to measure: loopback SFTP's order
if big:
    rate = sum(b for b, _ in big) / max(sum(s - lat for _, s in big), 1e-3)
json.dump({"name": "configured", "cls_invocation_s": 1.0, "queuing_delay_s": 0, "scp_latency_s": 0.5,
           "scp_rate_Bps": 10e6, "other_job_s": 0}, open(f"{out}/configured.json", "w"))
json.dump({"name": "measured", "cls_invocation_s": 0.01, "queuing_delay_s": 0.001, "scp_latency_s": max(lat, 1e-4),
           "scp_rate_Bps": rate, "other_job_s": 0}, open(f"{out}/measured-net.json", "w"))
print(f"measured in the FCFS run: {m['transfers']:.0f} transfers, {m['bytes']/2**20:.0f} MiB in {m['seconds']:.2f} s;"
      f" fitted: {lat*1e3:.1f} ms a file ({len(small)} small), {rate/1e6:.0f} MB/s ({len(big)} big)")
PY
# The thesis's model (a placeholder copies its job's inputs within its
# turn) and the live CLS's (--staging live), on both platforms.
for run in configured:inline configured:live measured-net:inline measured-net:live; do
	net=${run%:*} staging=${run#*:}
	"$OUT/mqsim" --workload "$OUT/workload.json" --network "$OUT/$net.json" --placeholders 2 --inflation 1 \
		--staging "$staging" --policy fcfs,dc --seeds "$SEEDS" --json >"$OUT/sim-$net-$staging.jsonl"
done

python3 - "$OUT" <<'PY'
import json, sys, statistics as st
out = sys.argv[1]
live = json.load(open(f"{out}/live.json"))
def sim(net):
    runs = {}
    for line in open(f"{out}/sim-{net}.jsonl"):
        r = json.loads(line)
        runs.setdefault(r["policy"], []).append(r)
    return {p: (st.mean(r["makespan_s"] for r in rs), st.mean(r["bytes_moved"] for r in rs), st.mean(r["data_affinity"] for r in rs))
            for p, rs in runs.items()}
cols = {"configured, inline": sim("configured-inline"), "configured, live": sim("configured-live"),
        "measured, inline": sim("measured-net-inline"), "measured, live": sim("measured-net-live")}
print("| policy | live makespan (s) | live MiB moved | live with data | "
      + " | ".join(f"mqsim {c}: makespan, MiB, affinity" for c in cols) + " |")
print("|---" * (4 + len(cols)) + "|")
for p in ("fcfs", "dc"):
    l = live[p]
    cells = [f"{l['makespan_s']:.1f}", f"{l['bytes_moved']/2**20:.0f} ({l['transfers']} transfers)", f"{l['with_data']}/{l['jobs']}"]
    for c in cols:
        mk, b, a = cols[c][p]
        cells.append(f"{mk:.1f}, {b/2**20:.0f}, {a:.2f}")
    print(f"| {p} | " + " | ".join(cells) + " |")
PY
if [ -n "${DC_KEEP:-}" ]; then cp "$OUT"/*.txt "$OUT"/*.json "$OUT"/*.jsonl "$DC_KEEP"/ 2>/dev/null || true; fi
