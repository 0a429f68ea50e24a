#!/usr/bin/env bash
# DAG-shaped workloads: the numbers in BENCHMARKS.md, "DAG-shaped
# workloads". Builds the binaries, then, each against a fresh CLS:
#
#   1. bulk submit of DAG_JOBS jobs through one `mqsub -f` (--local 0), by
#      shape: one target (flat), a target per job (targets), two-stage
#      pipelines whose second stages share a target (pipes-shared: a{i},
#      then a job in b needing a{i}), and two-stage pipelines with
#      per-pipeline targets (pipes: a{i}, b{i}); ratios against flat.
#   2. dependency hop latency (mqbench hops) on --local 1 --slots 8, then
#      over SSH (one `cls agent`, 8 slots, through `cls serve --ssh`).
#   3. DAG_PIPES two-stage pipelines of `sleep 0.02` stages on 8 slots,
#      against `xargs -P 8` running each pipeline as one chained command.
#   4. live replay of the real traces in ../shared/data/wfinstances
#      (mqbench wfreplay, 8 slots): makespan against max(critical path,
#      work/slots), and the ideal list schedules of the same DAGs with
#      no overhead (mqbench wfideal: FCFS and cp). DAG_POLICY="fcfs,cp"
#      replays each trace under each policy in turn, estimates declared;
#      DAG_PLANNER=list plans each replay first (cls plan make --planner).
#
# Usage: scripts/bench/dag.sh            DAG_ONLY="1 2" DAG_JOBS=1000000 ...
# Knobs: DAG_JOBS (200000), DAG_PIPES (500), DAG_ONLY ("1 2 3 4"), DAG_REPEAT
# (step 3's alternating rounds, 3),
# DAG_BOUND (seconds each trace's bound is scaled to, 5), DAG_POLICY, DAG_PLANNER,
# DAG_TRACES (step 4's trace files; default all), DAG_BIN (use these
# binaries instead of building). Not for CI: it wants a quiet machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
JOBS=${DAG_JOBS:-200000}
PIPES=${DAG_PIPES:-500}
ONLY=${DAG_ONLY:-"1 2 3 4"}
BOUND=${DAG_BOUND:-5}
REPEAT=${DAG_REPEAT:-3}
WORK=$(mktemp -d /tmp/mqdag.XXXXXX)
PIDS=()
cleanup() {
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT
if [ -n "${DAG_BIN:-}" ]; then
	BIN=$DAG_BIN
else
	BIN=$WORK/bin
	(cd "$ROOT" && PATH=/usr/local/go/bin:$PATH go build -o "$BIN/" ./cmd/... ./scripts/bench/mqbench)
fi
export PATH=$BIN:$PATH

# start_cls ARGS...: a fresh CLS in its own MQ_HOME, ready.
start_cls() {
	export MQ_HOME=$(mktemp -d "$WORK/h.XXXXXX")
	cls serve "$@" >"$MQ_HOME/stderr" 2>&1 &
	PIDS+=($!)
	CLS=$!
	mqbench ready
}
stop_cls() {
	kill "$CLS" 2>/dev/null || true
	wait "$CLS" 2>/dev/null || true
}
has() { case " $ONLY " in *" $1 "*) return 0 ;; esac; return 1; }

if has 1; then
	echo "== 1. bulk submit by shape, $JOBS jobs"
	python3 - "$WORK" "$JOBS" <<'EOF'
import sys
work, n = sys.argv[1], int(sys.argv[2])
cmd = lambda i: '"command":"./simulate --case %d > out/case%d.txt"' % (i, i)
shapes = {
    "flat": lambda: ('{"target":"t",%s}' % cmd(i) for i in range(n)),
    "targets": lambda: ('{"target":"t%d",%s}' % (i, cmd(i)) for i in range(n)),
    "pipes-shared": lambda: (l for i in range(n // 2) for l in (
        '{"target":"a%d",%s}' % (i, cmd(i)), '{"target":"b","prereqs":["a%d"],%s}' % (i, cmd(i)))),
    "pipes": lambda: (l for i in range(n // 2) for l in (
        '{"target":"a%d",%s}' % (i, cmd(i)), '{"target":"b%d","prereqs":["a%d"],%s}' % (i, i, cmd(i)))),
}
for name, gen in shapes.items():
    with open("%s/%s.jsonl" % (work, name), "w") as f:
        for line in gen():
            f.write(line + "\n")
EOF
	flat=""
	for shape in flat targets pipes-shared pipes; do
		start_cls --local 0
		t0=$(date +%s.%N)
		mqsub -f "$WORK/$shape.jsonl" >/dev/null
		t1=$(date +%s.%N)
		rss=$(awk '/VmRSS/{print $2}' /proc/$CLS/status)
		stop_cls
		s=$(echo "$t1 - $t0" | bc -l)
		[ -z "$flat" ] && flat=$s
		printf 'shape=%s jobs=%d seconds=%.2f jobs_per_s=%.0f vs_flat=%.2f cls_rss_mb=%d\n' \
			"$shape" "$JOBS" "$s" "$(echo "$JOBS / $s" | bc -l)" "$(echo "$s / $flat" | bc -l)" $((rss / 1024))
	done
fi

if has 2; then
	echo "== 2. dependency hop latency, --local 1 --slots 8"
	start_cls --local 1 --slots 8
	echo "sleep 0.02 stages, 2 pipelines a round: $(mqbench hops -rounds 100 -width 2)"
	echo "true stages, 1 pipeline a round:       $(mqbench hops -rounds 100 -width 1 -prefix h1 -cmd true)"
	stop_cls
	echo "== 2b. dependency hop latency over SSH: one agent, 8 slots, through the CLS's SSH endpoint"
	start_cls --local 0 --ssh 127.0.0.1:0
	cls key new --role placeholder "$MQ_HOME/ph" >/dev/null
	fp=$(cls key host | sed -n 1p)
	addr=
	for ((i = 0; i < 100; i++)); do # the socket may answer before the SSH port is announced
		addr=$(sed -n 's/^cls: SSH on \([^,]*\),.*/\1/p' "$MQ_HOME/stderr" | tail -1)
		[ -n "$addr" ] && break
		sleep 0.1
	done
	[ -n "$addr" ] || { echo "dag: the CLS announced no SSH address" >&2; exit 1; }
	MQ_HOME=$MQ_HOME/agent cls agent --cls "$addr" --host-key "$fp" --key "$MQ_HOME/ph" \
		--site ssh --host a0 --slots 8 --out "$MQ_HOME/agent/out" 2>>"$MQ_HOME/agent.err" &
	PIDS+=($!)
	echo "sleep 0.02 stages, 2 pipelines a round: $(mqbench hops -rounds 100 -width 2)"
	echo "true stages, 1 pipeline a round:       $(mqbench hops -rounds 100 -width 1 -prefix h1 -cmd true)"
	stop_cls
fi

if has 3; then
	echo "== 3. $PIPES two-stage pipelines of sleep 0.02 on 8 slots, $REPEAT alternating rounds"
	seq "$PIPES" | awk '{printf "{\"target\":\"a%d\",\"command\":\"sleep 0.02\"}\n{\"target\":\"b%d\",\"prereqs\":[\"a%d\"],\"command\":\"sleep 0.02\"}\n", $1, $1, $1}' >"$WORK/pipes.jsonl"
	ratios=()
	for ((r = 1; r <= REPEAT; r++)); do
		run_mq() {
			start_cls --local 1 --slots 8
			mq=$(mqbench drain -n $((2 * PIPES)) -- mqsub -f "$WORK/pipes.jsonl" | sed -n 's/.*total_s=\([0-9.]*\).*/\1/p')
			stop_cls
		}
		run_xargs() {
			t0=$(date +%s.%N)
			seq "$PIPES" | xargs -P 8 -I{} sh -c 'sleep 0.02 && sleep 0.02'
			t1=$(date +%s.%N)
			x=$(echo "$t1 - $t0" | bc -l)
		}
		# Alternate which goes first, so a busy machine disturbs both alike.
		if ((r % 2)); then run_mq; run_xargs; else run_xargs; run_mq; fi
		ratio=$(echo "$mq / $x" | bc -l)
		ratios+=("$ratio")
		printf 'round=%d mq_s=%.2f xargs_chained_s=%.2f ratio=%.2f ideal_s=%.2f load=%s\n' "$r" "$mq" "$x" "$ratio" "$(echo "$PIPES * 0.04 / 8" | bc -l)" "$(cut -d' ' -f1 /proc/loadavg)"
	done
	printf 'median ratio=%.2f\n' "$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')"
fi

if has 4; then
	echo "== 4. live replay of real traces, 8 slots, each scaled to a ${BOUND}s bound"
	traces=${DAG_TRACES:-$(ls "$ROOT"/../shared/data/wfinstances/*.json 2>/dev/null || true)}
	if [ -z "$traces" ]; then
		echo "skipped: no traces in ../shared/data/wfinstances"
	else
		start_cls --local 1 --slots 8
		# shellcheck disable=SC2086
		mqbench wfreplay -slots 8 -bound "${BOUND}s" ${DAG_POLICY:+-policy "$DAG_POLICY" -est} ${DAG_PLANNER:+-planner "$DAG_PLANNER"} $traces
		stop_cls
		# shellcheck disable=SC2086
		mqbench wfideal -slots 8 $traces
	fi
fi
