#!/usr/bin/env bash
# The cost of watching: the core's no-op and `true` benchmarks
# with the dashboard open and /metrics scraped every second, against the
# same benchmarks without them, in the same run. Each repetition runs both
# variants back to back, alternating which goes first, so a busy machine
# disturbs both alike; the medians and their ratio are reported.
#
#   noop: cls serve --local 2 --slots 8 --noop --sync full, Done rate with
#         about 1,000 jobs pending (mqbench rate -feed 1000).
#   true: cls serve --local 2, DASH_TRUE_JOBS `true` jobs submitted with
#         mqsub -f, submit to all Done (mqbench drain).
#   "watched": the CLS runs with --http 127.0.0.1:0, one client follows
#         /events (the overview's server-sent events, as an open page does)
#         and another scrapes /metrics every second, both with the token.
#
# Usage: scripts/bench/dash.sh     Knobs: DASH_REPEAT (5), DASH_TRUE_JOBS
# (2000), DASH_WINDOW (seconds, 10), DASH_BIN (use these binaries instead
# of building). Not for CI: it wants a quiet machine, and says how busy it
# was.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REPEAT=${DASH_REPEAT:-5}
TRUE_JOBS=${DASH_TRUE_JOBS:-2000}
WINDOW=${DASH_WINDOW:-10}
WORK=$(mktemp -d /tmp/mqdash.XXXXXX)
BIN=${DASH_BIN:-$WORK/bin}

PIDS=()
cleanup() {
	local rc=$? p
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$WORK"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${DASH_BIN:-}" ]; then
	(cd "$ROOT" && go build -o "$BIN/" ./cmd/... ./scripts/bench/mqbench)
fi
cp "$BIN/cls" "$WORK/dashsrv" # a name of its own on a shared machine

median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
kv() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }
busy() {
	local a b
	a=($(head -1 /proc/stat))
	sleep 1
	b=($(head -1 /proc/stat))
	awk -v u1="${a[1]}" -v n1="${a[2]}" -v s1="${a[3]}" -v i1="${a[4]}" -v w1="${a[5]}" \
		-v u2="${b[1]}" -v n2="${b[2]}" -v s2="${b[3]}" -v i2="${b[4]}" -v w2="${b[5]}" \
		'BEGIN { t = (u2+n2+s2+i2+w2) - (u1+n1+s1+i1+w1); printf "%.0f", (t > 0 ? 100 * ((u2+n2+s2) - (u1+n1+s1)) / t : 0) }'
}
LOADS=()

# start HOME WATCHED ARGS...: start a CLS; with WATCHED=1 also the
# dashboard, an /events follower and a 1 s /metrics scraper.
start() {
	local home=$1 watched=$2
	shift 2
	mkdir -p "$home"
	local extra=()
	((watched)) && extra=(--http 127.0.0.1:0)
	MQ_HOME=$home "$WORK/dashsrv" serve "$@" "${extra[@]}" 2>>"$home/serve.err" &
	CLS_PID=$!
	PIDS+=("$CLS_PID")
	MQ_HOME=$home "$BIN/mqbench" ready -timeout 5m
	if ((watched)); then
		local addr
		addr=$(sed -n 's|.*dashboard on http://\([^/]*\)/.*|\1|p' "$home/serve.err" | tail -1)
		[ -n "$addr" ] || { echo "dash: no dashboard address in $home/serve.err" >&2; exit 1; }
		local auth="Authorization: Bearer $(cat "$home/http.token")"
		curl -sN -H "$auth" "http://$addr/events" </dev/null >"$home/events.out" 2>/dev/null &
		PIDS+=($!)
		(while sleep 1; do curl -s -o /dev/null -H "$auth" "http://$addr/metrics"; done) </dev/null >/dev/null 2>&1 &
		PIDS+=($!)
	fi
}
stop() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	PIDS=()
}

"$BIN/mqbench" gen -targets 1 -per "$TRUE_JOBS" -prereqs=false -cmd true -o "$WORK/true.jsonl" >/dev/null

run() { # run CASE WATCHED REP: one measurement, its jobs/s in RESULT
	local c=$1 w=$2 rep=$3 h=$WORK/h-$1-$2-$3 out
	LOADS+=("$(busy)")
	case $c in
	noop)
		start "$h" "$w" --local 2 --slots 8 --noop --sync full
		out=$(MQ_HOME=$h "$BIN/mqbench" rate -cls "$CLS_PID" -feed 1000 -warmup 2s -window "${WINDOW}s")
		;;
	true)
		start "$h" "$w" --local 2
		out=$(MQ_HOME=$h "$BIN/mqbench" drain -cls "$CLS_PID" -n "$TRUE_JOBS" -- "$BIN/mqsub" -f "$WORK/true.jsonl")
		;;
	esac
	if ((w)) && ! grep -q '^event: update' "$h/events.out"; then
		echo "dash: the /events follower got no update" >&2
		exit 1
	fi
	stop
	rm -rf "$h"
	echo "   $c watched=$w rep $rep: $out"
	RESULT=$(kv "$out" jobs_per_s)
	CPU=$(kv "$out" cls_cpu_us_per_job)
}

echo "== the core with and without the dashboard watched ($REPEAT alternating repetitions)"
for c in noop true; do
	plain=() watched=() pcpu=() wcpu=() pairs=()
	for ((rep = 1; rep <= REPEAT; rep++)); do
		for w in $( ((rep % 2)) && echo 0 1 || echo 1 0); do
			run "$c" "$w" "$rep"
			if ((w)); then
				watched+=("$RESULT") wcpu+=("$CPU") wr=$RESULT
			else
				plain+=("$RESULT") pcpu+=("$CPU") pr=$RESULT
			fi
		done
		pairs+=("$(awk -v a="$wr" -v b="$pr" 'BEGIN { printf "%.3f", a / b }')")
	done
	p=$(median "${plain[@]}") w=$(median "${watched[@]}")
	r=$(awk -v a="$w" -v b="$p" 'BEGIN { printf "%.3f", a / b }')
	echo "$c: plain median $p jobs/s (${plain[*]}), watched median $w jobs/s (${watched[*]}): watched/plain = $r;" \
		"median of the pairs' ratios $(median "${pairs[@]}") (${pairs[*]});" \
		"CLS CPU per job: plain $(median "${pcpu[@]}") us, watched $(median "${wcpu[@]}") us"
done
echo "machine busy before each run (% CPU, others' work): median $(median "${LOADS[@]}"), range $(printf '%s\n' "${LOADS[@]}" | sort -n | head -1)..$(printf '%s\n' "${LOADS[@]}" | sort -n | tail -1)"
