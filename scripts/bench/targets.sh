#!/usr/bin/env bash
# A target of a million jobs: the numbers in BENCHMARKS.md, "A target of a
# million jobs". One MQ_HOME with TARGET_N jobs queued in one target
# (`mqsub --array 1-N T true`, --local 0); then, alternated TARGET_ROUNDS
# times, the revision BASE's CLS, mqstat and mqwait and the work tree's on
# that same MQ_HOME: `mqstat --summary -t T` (10 runs after 2 to warm up,
# mqbench times, median), and the CLS's CPU time over TARGET_WAIT_S
# seconds of `mqwait -t T` (which waits on: nothing runs), from
# /proc/PID/stat; and beside them 3 jobs of a Snakemake run (targets
# smk.run1.r1.1 ...): the listing `mq-status` asks of it every second
# (`mqstat --target-prefix smk.run1. -s WQHPEDFBX --json`) and `mqstat
# --summary --target-prefix smk.run1.`, 10 runs after 2, medians; the
# target in its queue (`mqstat --summary -q default -t T`, and the CLS's
# CPU over TARGET_WAIT_S seconds of `mqwait -q default -t T`); and the
# dashboard's first page of a queue of 40 jobs submitted after the
# million (`/jobs?queue=small`, curl with the token, 10 runs after 2).
#
# Usage: scripts/bench/targets.sh BASE     TARGET_N=1000000 TARGET_ROUNDS=2 TARGET_WAIT_S=10
# Not for CI: it wants a quiet machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BASE=${1:?usage: scripts/bench/targets.sh BASE (a git revision)}
N=${TARGET_N:-1000000}
ROUNDS=${TARGET_ROUNDS:-2}
WAIT_S=${TARGET_WAIT_S:-10}
WORK=$(mktemp -d /tmp/mqtargets.XXXXXX)
H=$WORK/home
PID=
PORT=${TARGET_PORT:-$((20000 + $$ % 20000))}
cleanup() {
	[ -n "$PID" ] && { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
	git -C "$ROOT" worktree remove --force "$WORK/base" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT

git -C "$ROOT" worktree add -q --detach "$WORK/base" "$BASE"
(cd "$WORK/base" && go build -o "$WORK/bin.base/" ./cmd/cls ./cmd/mqsub ./cmd/mqstat ./cmd/mqwait)
(cd "$ROOT" && go build -o "$WORK/bin.new/" ./cmd/cls ./cmd/mqsub ./cmd/mqstat ./cmd/mqwait ./scripts/bench/mqbench)

start() { # side
	MQ_HOME=$H "$WORK/bin.$1/cls" serve --local 0 --http "127.0.0.1:$PORT" >"$WORK/cls.$1.log" 2>&1 &
	PID=$!
	for _ in $(seq 600); do
		MQ_HOME=$H "$WORK/bin.$1/mqstat" --summary >/dev/null 2>&1 && return
		sleep 0.1
	done
	echo "targets.sh: the $1 CLS did not answer in 60 s" >&2
	exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=; }
median() { sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p'; }
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; } # clock ticks

mkdir -p "$H"
start new
MQ_HOME=$H "$WORK/bin.new/mqsub" --array "1-$N" T true >/dev/null
for i in 1 2 3; do MQ_HOME=$H "$WORK/bin.new/mqsub" "smk.run1.r$i.1" true >/dev/null; done
MQ_HOME=$H "$WORK/bin.new/mqsub" -q small --array 1-40 S true >/dev/null
stop
hz=$(getconf CLK_TCK)
echo "== $N jobs queued in target T; base $(git -C "$ROOT" rev-parse --short "$BASE") against the work tree, $ROUNDS rounds"
for ((r = 1; r <= ROUNDS; r++)); do
	for side in base new; do
		start "$side"
		sum=$(MQ_HOME=$H "$WORK/bin.new/mqbench" times -n 10 -warmup 2 -- "$WORK/bin.$side/mqstat" --summary -t T | median)
		list=$(MQ_HOME=$H "$WORK/bin.new/mqbench" times -n 10 -warmup 2 -- "$WORK/bin.$side/mqstat" --target-prefix smk.run1. -s WQHPEDFBX --json | median)
		psum=$(MQ_HOME=$H "$WORK/bin.new/mqbench" times -n 10 -warmup 2 -- "$WORK/bin.$side/mqstat" --summary --target-prefix smk.run1. | median)
		qsum=$(MQ_HOME=$H "$WORK/bin.new/mqbench" times -n 10 -warmup 2 -- "$WORK/bin.$side/mqstat" --summary -q default -t T | median)
		auth="Authorization: Bearer $(cat "$H/http.token")"
		page=$(MQ_HOME=$H "$WORK/bin.new/mqbench" times -n 10 -warmup 2 -- curl -sf -o /dev/null -H "$auth" "http://127.0.0.1:$PORT/jobs?queue=small" | median)
		c0=$(cpu)
		MQ_HOME=$H timeout "$WAIT_S" "$WORK/bin.$side/mqwait" -t T -Q >/dev/null 2>&1 || true
		c1=$(cpu)
		MQ_HOME=$H timeout "$WAIT_S" "$WORK/bin.$side/mqwait" -q default -t T -Q >/dev/null 2>&1 || true
		c2=$(cpu)
		echo "round $r $side: mqstat --summary -t T median $sum ms; CLS CPU over ${WAIT_S} s of mqwait -t T $(((c1 - c0) * 1000 / hz)) ms; a run's listing by prefix $list ms, its --summary $psum ms; with -q default: --summary $qsum ms, CLS CPU of mqwait $(((c2 - c1) * 1000 / hz)) ms; /jobs?queue=small $page ms; load $(cut -d' ' -f1 /proc/loadavg)"
		stop
	done
done
