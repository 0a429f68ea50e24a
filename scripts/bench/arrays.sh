#!/usr/bin/env bash
# A large job array's listings: the numbers in BENCHMARKS.md, "A job array
# of a million". One MQ_HOME with an array of ARRAY_N members queued
# (`mqsub --array`, --local 0) and one job outside it, or with ARRAY_MANY
# set, that many arrays of ARRAY_N/ARRAY_MANY members, a job before each
# and one after the last; then, alternated
# ARRAY_ROUNDS times, the revision BASE's CLS and mqstat and the work
# tree's on that same MQ_HOME: `mqstat` (the default listing: the array
# collapsed to a line with its counts) and `mqstat -j` of a member, 10 runs
# each after 2 to warm up (mqbench times), medians.
#
# Usage: scripts/bench/arrays.sh BASE     ARRAY_N=1000000 ARRAY_ROUNDS=3 ARRAY_MANY=
# Not for CI: it wants a quiet machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BASE=${1:?usage: scripts/bench/arrays.sh BASE (a git revision)}
N=${ARRAY_N:-1000000}
ROUNDS=${ARRAY_ROUNDS:-3}
MANY=${ARRAY_MANY:-1}
WORK=$(mktemp -d /tmp/mqarrays.XXXXXX)
H=$WORK/home
PID=
cleanup() {
	[ -n "$PID" ] && { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
	git -C "$ROOT" worktree remove --force "$WORK/base" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT

git -C "$ROOT" worktree add -q --detach "$WORK/base" "$BASE"
(cd "$WORK/base" && go build -o "$WORK/bin.base/" ./cmd/...)
(cd "$ROOT" && go build -o "$WORK/bin.new/" ./cmd/... && go build -o "$WORK/bin.new/" ./scripts/bench/mqbench)

start() { # side
	MQ_HOME=$H "$WORK/bin.$1/cls" serve --local 0 >"$WORK/cls.$1.log" 2>&1 &
	PID=$!
	for _ in $(seq 600); do
		MQ_HOME=$H "$WORK/bin.$1/mqstat" --summary >/dev/null 2>&1 && return
		sleep 0.1
	done
	echo "arrays.sh: the $1 CLS did not answer in 60 s" >&2
	exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=; }
median() { sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p'; }

mkdir -p "$H"
start new
if ((MANY == 1)); then
	MQ_HOME=$H "$WORK/bin.new/mqsub" --array "1-$N" big true >/dev/null
else
	for ((a = 0; a < MANY; a++)); do
		MQ_HOME=$H "$WORK/bin.new/mqsub" solo true >/dev/null
		MQ_HOME=$H "$WORK/bin.new/mqsub" --array "1-$((N / MANY))" big true >/dev/null
	done
fi
MQ_HOME=$H "$WORK/bin.new/mqsub" solo true >/dev/null
stop
member=$((N / 2))
echo "== $N members in $MANY array(s) queued; base $(git -C "$ROOT" rev-parse --short "$BASE") against the work tree, $ROUNDS rounds"
for ((r = 1; r <= ROUNDS; r++)); do
	for side in base new; do
		start "$side"
		list=$(MQ_HOME=$H "$WORK/bin.new/mqbench" times -n 10 -warmup 2 -- "$WORK/bin.$side/mqstat" | median)
		job=$(MQ_HOME=$H "$WORK/bin.new/mqbench" times -n 10 -warmup 2 -- "$WORK/bin.$side/mqstat" -j "$member" | median)
		echo "round $r $side: mqstat median $list ms, mqstat -j $member median $job ms"
		stop
	done
done
