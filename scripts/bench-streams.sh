#!/usr/bin/env bash
# Output streams against a file per output, same run: N `echo` jobs (one
# array, mqsub -b: submit to all Done) on cls serve --local 2 with
# --output files and --output streams, alternated ROUNDS times each. Per
# run: jobs/s, the files left in the output area, and the median of 50
# `mqstat --cat ID` of random jobs.
#
# Usage: [BENCH_STREAMS_JOBS=10000] [BENCH_STREAMS_ROUNDS=2] [BENCH_STREAMS_CMD="echo hi"]
#   [BENCH_STREAMS_MODES="files streams"] [BENCH_STREAMS_ARGS="--sync full"] scripts/bench-streams.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${BENCH_STREAMS_JOBS:-10000}
ROUNDS=${BENCH_STREAMS_ROUNDS:-2}
BIN=$(mktemp -d /tmp/mqstreams.XXXXXX)
trap 'rm -rf "$BIN"' EXIT
(cd "$ROOT" && go build -o "$BIN/" ./cmd/cls ./cmd/mqsub ./cmd/mqstat)
now() { date +%s.%N; }
echo "| mode | round | jobs | seconds | jobs/s | files in output/ | mqstat --cat median ms |"
echo "|---|---|---|---|---|---|---|"
for ((r = 1; r <= ROUNDS; r++)); do
	for mode in ${BENCH_STREAMS_MODES:-files streams}; do
		home=$(mktemp -d /tmp/mqstreams-home.XXXXXX)
		MQ_HOME=$home "$BIN/cls" serve --local 2 --output "$mode" ${BENCH_STREAMS_ARGS:-} >"$home/serve.out" 2>&1 &
		pid=$!
		for _ in $(seq 100); do [ -S "$home/cls.sock" ] && break; sleep 0.1; done
		t0=$(now)
		MQ_HOME=$home "$BIN/mqsub" -b --array "1-$N" t "${BENCH_STREAMS_CMD:-echo hi}" >"$home/ids"
		t1=$(now)
		files=$(find "$home/output" -type f | wc -l)
		cats=()
		for id in $(shuf -n 50 "$home/ids"); do
			c0=$(now)
			MQ_HOME=$home "$BIN/mqstat" --cat "$id" >/dev/null
			cats+=("$(echo "($(now) - $c0) * 1000" | bc -l)")
		done
		med=$(printf '%s\n' "${cats[@]}" | sort -n | awk '{ v[NR] = $1 } END { printf "%.1f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
		kill -TERM "$pid"
		wait "$pid" || true
		printf '| %s | %d | %d | %.2f | %.0f | %d | %s |\n' "$mode" "$r" "$N" "$(echo "$t1 - $t0" | bc -l)" "$(echo "$N / ($t1 - $t0)" | bc -l)" "$files" "$med"
		rm -rf "$home"
	done
done
