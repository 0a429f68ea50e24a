#!/usr/bin/env bash
# Snakemake 7 through mq against Snakemake's own executors: the
# numbers in BENCHMARKS.md, "Snakemake and Makeflow on mq". In one run, on one
# CLS (`cls serve --local SLOTS`), the three-stage workflow of
# examples/snakemake (SMK_N samples: a blast-like and a parse-like job each,
# then a summary job: 2N+1 jobs), each from scratch:
#
#   local      snakemake --cores SLOTS (no cluster: jobs are shell commands)
#   bg         --cluster with a plain background-launch submit command
#              (nohup sh JOBSCRIPT &), --jobs SLOTS, marker files for status
#   mq-markers --cluster mq-submit, no status command (Snakemake's marker files)
#   mq         the profile examples/snakemake/profile (mq-submit, mq-status,
#              mq-cancel)
#   mq-immed   --immediate-submit --notemp with mq-submit {dependencies}: every
#              job is submitted at once with its prerequisites, Snakemake exits,
#              and the time is until mq has run them all
#
# and then the per-call cost of mq's part: mq-submit, mq-status, mqsub and
# mqstat alone, /bin/true for scale. CI=true for every cluster run, so that
# Snakemake 7 checks its jobs every second, not every ten.
#
# Usage: scripts/bench/snakemake.sh      Knobs: SMK_N (50), SMK_SLOTS (8),
# SMK_SLEEP (seconds each blast job sleeps, 0), SMK_ONLY ("local bg
# mq-markers mq mq-immed calls"), SMK_BIN (use these binaries).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
N=${SMK_N:-50}
SLOTS=${SMK_SLOTS:-8}
SLEEP=${SMK_SLEEP:-0}
ONLY=${SMK_ONLY:-"local bg mq-markers mq mq-immed calls"}
WORK=$(mktemp -d /tmp/mqsmk.XXXXXX)
CLS=
cleanup() {
	[ -n "$CLS" ] && { kill "$CLS" 2>/dev/null || true; wait "$CLS" 2>/dev/null || true; }
	rm -rf "$WORK"
}
trap cleanup EXIT
command -v snakemake >/dev/null || { echo "snakemake is not installed (scripts/setup.sh)" >&2; exit 1; }
if [ -n "${SMK_BIN:-}" ]; then
	BIN=$SMK_BIN
else
	BIN=$WORK/bin
	(cd "$ROOT" && PATH=/usr/local/go/bin:$PATH go build -o "$BIN/" ./cmd/... ./scripts/bench/mqbench)
fi
PROFILE=$ROOT/examples/snakemake/profile
SNAKEFILE=$ROOT/examples/snakemake/Snakefile
export PATH=$BIN:$PROFILE:$PATH
export MQ_HOME=$WORK/home
mkdir -p "$MQ_HOME"
cls serve --local "$SLOTS" >"$WORK/cls.log" 2>&1 &
CLS=$!
mqbench ready

cat >"$WORK/bg-submit" <<'EOF'
#!/bin/sh
nohup /bin/sh "$1" >/dev/null 2>&1 &
echo $!
EOF
chmod +x "$WORK/bg-submit"

has() { case " $ONLY " in *" $1 "*) return 0 ;; esac; return 1; }
now() { date +%s.%N; }
load() { cut -d' ' -f1 /proc/loadavg; }
jobs=$((2 * N + 1))

# run NAME SNAKEMAKE_ARGS...: one workflow from scratch, timed; checks the summary.
run() {
	local name=$1
	shift
	local dir=$WORK/$name
	local l0 t0 t1
	l0=$(load)
	t0=$(now)
	snakemake -s "$SNAKEFILE" --directory "$dir" --config n="$N" sleep="$SLEEP" "$@" >"$WORK/$name.log" 2>&1 ||
		{ echo "$name: snakemake failed; last lines:" >&2; tail -20 "$WORK/$name.log" >&2; exit 1; }
	if [ "$name" = mq-immed ]; then
		# Snakemake has only submitted; wait for mq to run everything.
		until [ "$(mqstat -s WQE | wc -l)" -le 1 ]; do sleep 0.05; done
	fi
	t1=$(now)
	[ "$(wc -l <"$dir/summary.txt")" = "$N" ] || { echo "$name: summary.txt has $(wc -l <"$dir/summary.txt") lines, want $N" >&2; exit 1; }
	printf '%-10s %4d jobs  %7.2f s  %6.1f ms/job  load %s -> %s\n' "$name" "$jobs" \
		"$(echo "$t1 - $t0" | bc)" "$(echo "($t1 - $t0) * 1000 / $jobs" | bc -l)" "$l0" "$(load)"
}

echo "== Snakemake $(snakemake --version), $jobs jobs, $SLOTS slots, sleep $SLEEP s, $(nproc) CPUs, load $(load)"
has local && run local --cores "$SLOTS"
export CI=true
has bg && run bg --cluster "$WORK/bg-submit" --jobs "$SLOTS" --latency-wait 10
has mq-markers && run mq-markers --cluster mq-submit --jobs 500 --latency-wait 10
has mq && run mq --profile "$PROFILE"
has mq-immed && run mq-immed --cluster "mq-submit {dependencies}" --immediate-submit --notemp --jobs 500

if has calls; then
	# The per-job calls, 100 each, in a directory shaped like Snakemake's.
	d=$WORK/calls/.snakemake/tmp.bench
	mkdir -p "$d"
	: >"$d/snakejob.blast.1.sh"
	cd "$WORK/calls"
	mqsub calls.t0 true >/dev/null
	mq-submit .snakemake/tmp.bench/snakejob.blast.1.sh >/dev/null
	per() { # per NAME COMMAND...: milliseconds per call, 100 calls
		local t0 t1
		t0=$(now)
		for _ in $(seq 100); do "$@" >/dev/null; done
		t1=$(now)
		printf '%-24s %6.1f ms/call\n' "$1" "$(echo "($t1 - $t0) * 10" | bc -l)"
	}
	per /bin/true
	per mqstat -t calls.t0 --json
	per mq-status calls.t0                 # not a Snakemake target: one mqstat per call
	per mq-status smk.tmp.bench.blast.1    # the run's cache: one mqstat a second
	per mqsub calls.t1 true
	per mq-submit .snakemake/tmp.bench/snakejob.blast.1.sh
fi
