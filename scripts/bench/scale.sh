#!/usr/bin/env bash
# The metaqueue at scale (BENCHMARKS.md, "The metaqueue at 10,000,000
# jobs"): for each shape, SCALE_JOBS jobs in one `mqsub -f` into a fresh
# `cls serve --local 0` (nothing drains), then:
#
#   rate      jobs/s of the submit (wall, mqsub start to its reply)
#   rss       the CLS's VmRSS and VmHWM with every job queued
#   summary   `mqstat --summary` median and p90 of 20 runs
#   kill9     the CLS killed with SIGKILL, started again: seconds until it
#             answers (mqbench ready), its VmRSS then, and the summary's
#             median again, with the job count checked
#
# Shapes: flat (one target), pipes (two-stage pipelines with per-pipeline
# targets: a{i}, then b{i} needing a{i}).
#
# Usage: scripts/bench/scale.sh          (10,000,000 jobs a shape; ~1.4 GB of
#        job files and ~3 GB of database under SCALE_DIR while it runs)
# Knobs: SCALE_JOBS (10000000, even), SCALE_SHAPES ("flat pipes"), SCALE_DIR
# (work dir, default a new /tmp/mqscale.*, removed afterwards unless
# SCALE_KEEP=1), SCALE_BIN (use these binaries). Not for CI: it wants a
# quiet machine and memory.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
JOBS=${SCALE_JOBS:-10000000}
SHAPES=${SCALE_SHAPES:-"flat pipes"}
if ((JOBS % 2 != 0 || JOBS < 2)); then
	echo "scale: SCALE_JOBS must be even and positive" >&2
	exit 2
fi
WORK=${SCALE_DIR:-$(mktemp -d /tmp/mqscale.XXXXXX)}
mkdir -p "$WORK"
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]+"${PIDS[@]}"}"; do kill -9 "$p" 2>/dev/null || true; done
	[ "${SCALE_KEEP:-}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
if [ -n "${SCALE_BIN:-}" ]; then
	BIN=$SCALE_BIN
else
	BIN=$WORK/bin
	(cd "$ROOT" && go build -o "$BIN/" ./cmd/cls ./cmd/mqsub ./cmd/mqstat ./scripts/bench/mqbench)
fi

# start HOME: a CLS on HOME, ready; CLS its pid, READY_S seconds to ready.
start() {
	local t0=$EPOCHREALTIME
	MQ_HOME=$1 "$BIN/cls" serve --local 0 2>>"$1/serve.err" &
	CLS=$!
	PIDS+=("$CLS")
	MQ_HOME=$1 "$BIN/mqbench" ready -timeout 10m
	READY_S=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
}
mem() { awk -v k="$2:" '$1 == k { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }
kv() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }
total() { MQ_HOME=$1 "$BIN/mqstat" --summary | awk 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "TOTAL") c = i } $1 == "default" { print $c }'; }

echo "== the metaqueue at scale: $JOBS jobs a shape, $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
for shape in $SHAPES; do
	file=$WORK/$shape.jsonl
	python3 - "$file" "$JOBS" "$shape" <<'EOF'
import sys
path, n, shape = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cmd = lambda i: '"command":"./simulate --case %d > out/case%d.txt"' % (i, i)
with open(path, "w") as f:
    if shape == "flat":
        f.writelines('{"target":"t",%s}\n' % cmd(i) for i in range(n))
    elif shape == "pipes":
        f.writelines('{"target":"a%d",%s}\n{"target":"b%d","prereqs":["a%d"],%s}\n' % (i, cmd(i), i, i, cmd(i)) for i in range(n // 2))
    else:
        sys.exit("scale: unknown shape " + shape)
EOF
	H=$WORK/h-$shape
	mkdir -p "$H"
	start "$H"
	load=$(cut -d' ' -f1 /proc/loadavg)
	t0=$EPOCHREALTIME
	MQ_HOME=$H "$BIN/mqsub" -f "$file" >/dev/null
	s=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
	n=$(total "$H")
	[ "$n" = "$JOBS" ] || { echo "scale: expected $JOBS jobs, mqstat --summary says $n" >&2; exit 1; }
	rss=$(mem "$CLS" VmRSS) hwm=$(mem "$CLS" VmHWM)
	sum=$(MQ_HOME=$H "$BIN/mqbench" times -cls "$CLS" -n 20 -warmup 3 -- "$BIN/mqstat" --summary)
	kill -9 "$CLS"
	wait "$CLS" 2>/dev/null || true
	start "$H"
	n2=$(total "$H")
	[ "$n2" = "$JOBS" ] || { echo "scale: after kill -9, mqstat --summary says $n2 jobs, not $JOBS" >&2; exit 1; }
	rss2=$(mem "$CLS" VmRSS)
	sum2=$(MQ_HOME=$H "$BIN/mqbench" times -cls "$CLS" -n 20 -warmup 3 -- "$BIN/mqstat" --summary)
	kill "$CLS"
	wait "$CLS" 2>/dev/null || true
	printf 'shape=%s jobs=%d submit_s=%s jobs_per_s=%.0f rss_mb=%s hwm_mb=%s summary_ms=%s summary_p90_ms=%s kill9_ready_s=%s rss_after_mb=%s summary_after_ms=%s db_mb=%s load=%s\n' \
		"$shape" "$JOBS" "$s" "$(awk -v n="$JOBS" -v s="$s" 'BEGIN { print n / s }')" "$rss" "$hwm" \
		"$(kv "$sum" median_ms)" "$(kv "$sum" p90_ms)" "$READY_S" "$rss2" "$(kv "$sum2" median_ms)" \
		"$(du -sm "$H" | cut -f1)" "$load"
	[ "${SCALE_KEEP:-}" = 1 ] || rm -rf "$H" "$file"
done
