#!/usr/bin/env bash
# Remote output, streams against a file per output, same run: N `echo`
# jobs (one array, mqsub -b: submit to all Done) through 2 remote
# placeholders (cls agent --cls over the CLS's SSH endpoint, --slots
# SLOTS each) with cls serve --output files and --output streams,
# alternated ROUNDS times. Per run: jobs/s, the requests the agents sent
# of op output (a file per job) and output.ship (streams in bulk), the
# files in the CLS's output area, and the seconds from the last job's end
# to its output readable on the CLS host (mqstat --cat), also as a share
# of the time the jobs took.
#
# Usage: [BENCH_SSH_JOBS=10000] [BENCH_SSH_ROUNDS=1] [BENCH_SSH_SLOTS=2]
#   [BENCH_SSH_MODES="files streams"] scripts/bench-streams-ssh.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${BENCH_SSH_JOBS:-10000}
ROUNDS=${BENCH_SSH_ROUNDS:-1}
SLOTS=${BENCH_SSH_SLOTS:-2}
BIN=$(mktemp -d /tmp/mqshipbench.XXXXXX)
pid= agents=() home=
# A run cut short leaves no CLS, agent or home behind.
trap 'kill -TERM $pid "${agents[@]}" 2>/dev/null; rm -rf "$BIN" ${home:+"$home"}' EXIT
(cd "$ROOT" && go build -o "$BIN/" ./cmd/cls ./cmd/mqsub ./cmd/mqstat)
now() { date +%s.%N; }
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
echo "| mode | round | jobs | seconds | jobs/s | output requests | output.ship requests | files in output/ | last output readable after its end, s | share of the run |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for ((r = 1; r <= ROUNDS; r++)); do
	for mode in ${BENCH_SSH_MODES:-files streams}; do
		home=$(mktemp -d /tmp/mqshipbench-home.XXXXXX)
		export MQ_HOME=$home
		addr=127.0.0.1:$(port)
		fp=$("$BIN/cls" key host | sed -n 1p)
		"$BIN/cls" serve --local 0 --ssh "$addr" --output "$mode" >"$home/serve.out" 2>&1 &
		pid=$!
		for _ in $(seq 100); do [ -S "$home/cls.sock" ] && break; sleep 0.1; done
		agents=()
		for a in 1 2; do
			"$BIN/cls" key new --role placeholder --name "ph$a" "$home/ph$a.key" >/dev/null
			"$BIN/cls" agent --cls "$addr" --host-key "$fp" --key "$home/ph$a.key" --site remote \
				--out "$home/agent$a" --slots "$SLOTS" --log-level info >"$home/agent$a.log" 2>&1 &
			agents+=($!)
		done
		t0=$(now)
		"$BIN/mqsub" -b --array "1-$N" t "echo hi" >"$home/ids"
		t1=$(now)
		last=$(tail -1 "$home/ids")
		until [ "$("$BIN/mqstat" --cat "$last" 2>/dev/null)" = hi ]; do sleep 0.01; done
		t2=$(now)
		fin=$("$BIN/mqstat" -j "$last" --json | python3 -c 'import json, sys, datetime; print(datetime.datetime.fromisoformat(json.load(sys.stdin)["finished"].replace("Z", "+00:00")).timestamp())')
		files=$(find "$home/output" -type f | wc -l)
		kill -TERM "${agents[@]}"
		wait "${agents[@]}" || true
		reqs() { { grep -ho "[ \[]$1:[0-9]*" "$home"/agent?.log || true; } | tr -d ' [' | awk -F: '{ s += $2 } END { print s + 0 }'; }
		out=$(reqs 'output'); ship=$(reqs 'output\.ship')
		kill -TERM "$pid"
		wait "$pid" || true
		lag=$(echo "$t2 - $fin" | bc -l)
		printf '| %s | %d | %d | %.2f | %.0f | %d | %d | %d | %.2f | %.1f %% |\n' "$mode" "$r" "$N" "$(echo "$t1 - $t0" | bc -l)" \
			"$(echo "$N / ($t1 - $t0)" | bc -l)" "$out" "$ship" "$files" "$lag" "$(echo "100 * $lag / ($t1 - $t0)" | bc -l)"
		rm -rf "$home"
		pid= agents=() home=
	done
done
