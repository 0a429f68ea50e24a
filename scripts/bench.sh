#!/usr/bin/env bash
# mq's system benchmarks (the numbers in BENCHMARKS.md). Builds the binaries
# and scripts/bench/mqbench (the measuring helper), then runs:
#
#   1. bulk submit: BENCH_JOBS jobs through `mqsub -f` into a CLS with
#      --local 0 (nothing drains); CLS VmRSS/VmHWM afterwards; `mqstat
#      --summary` latency at that size (20 runs).
#   2. scheduling path with the no-op executor (--noop, --sync full): Done
#      rate with a small backlog (rounds of 1,000 jobs) and with the
#      BENCH_JOBS backlog of test 1, for each "PLACEHOLDERSxSLOTS" config.
#   3. real processes: BENCH_TRUE_JOBS `true` jobs on --local 2, submit to
#      all Done, against `seq N | parallel -j2 true` in the same run.
#   4. `mqsub -b t true` round trip against an idle CLS (--local 2).
#   5. SSH placeholders: BENCH_TRUE_JOBS `true` jobs through 2 agents over
#      SSH (cls agent --cls) against 2 local placeholders in the same run;
#      then BENCH_AGENTS agents connected over SSH running `sleep 1` jobs:
#      CLS RSS growth per agent and mqstat latency meanwhile.
#
# Usage: scripts/bench.sh                      (full: 1,000,000 jobs, ~10 min)
#        BENCH_JOBS=100000 scripts/bench.sh    (quick)
# Knobs: BENCH_JOBS (multiple of 10), BENCH_TRUE_JOBS (5000), BENCH_RTT_RUNS
# (200), BENCH_SCHED ("2x1 2x8 8x8"), BENCH_WINDOW (seconds, 10),
# BENCH_REPEAT (runs of each case of tests 2 and 3, median reported; 1),
# BENCH_AGENTS (64), BENCH_ONLY ("1 2 3 4 5"; 2 needs 1), BENCH_QUIET_WAIT (seconds to wait for
# other work to stop before each step, 300), BENCH_DIR (work dir, default a new
# /tmp/mqbench.*; removed afterwards unless BENCH_KEEP=1), BENCH_OUT (also
# write the results table there). Not for CI: it wants a quiet machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
JOBS=${BENCH_JOBS:-1000000}
TRUE_JOBS=${BENCH_TRUE_JOBS:-5000}
RTT_RUNS=${BENCH_RTT_RUNS:-200}
SCHED=${BENCH_SCHED:-"2x1 2x8 8x8"}
WINDOW=${BENCH_WINDOW:-10}
ONLY=${BENCH_ONLY:-"1 2 3 4 5"}
AGENTS=${BENCH_AGENTS:-64}
QUIET_WAIT=${BENCH_QUIET_WAIT:-300}
REPEAT=${BENCH_REPEAT:-1}
if ((JOBS < 1000 || JOBS % 10 != 0)); then
	echo "bench: BENCH_JOBS must be a multiple of 10, at least 1000" >&2
	exit 2
fi
case " $ONLY " in *" 2 "*) case " $ONLY " in *" 1 "*) ;; *) ONLY="1 $ONLY" ;; esac ;; esac

if [ -n "${BENCH_DIR:-}" ]; then
	WORK=$BENCH_DIR
	mkdir -p "$WORK"
else
	WORK=$(mktemp -d /tmp/mqbench.XXXXXX) # short: MQ_HOME holds a Unix socket
fi
BIN=$WORK/bin

# ---- processes: every CLS we start is recorded and stopped on exit ----
PIDS=()
stop_pid() {
	local pid=$1 kids i
	kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
	kids=$(pgrep -P "$pid" 2>/dev/null || true) # its local placeholders
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	for k in $kids; do kill -KILL "$k" 2>/dev/null || true; done
}
cleanup() {
	local rc=$?
	for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
	PIDS=()
	if [ "${BENCH_KEEP:-0}" = 1 ]; then
		echo "bench: kept $WORK" >&2
	else
		rm -rf "$WORK"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_cls HOME ARGS...: start `cls serve` on HOME, wait until it answers;
# sets CLS_PID and READY_S (seconds from start to answering).
start_cls() {
	local home=$1
	shift
	mkdir -p "$home"
	local t0=$EPOCHREALTIME
	MQ_HOME=$home "$BIN/benchsrv" serve "$@" 2>>"$home/serve.err" &
	CLS_PID=$!
	PIDS+=("$CLS_PID")
	MQ_HOME=$home "$BIN/mqbench" ready -timeout 10m
	READY_S=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
}
stop_cls() {
	stop_pid "$CLS_PID"
	local keep=() p
	for p in "${PIDS[@]}"; do [ "$p" = "$CLS_PID" ] || keep+=("$p"); done
	PIDS=("${keep[@]+"${keep[@]}"}")
}

# kv LINE KEY: the value of KEY=... in a key=value line.
kv() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
verdict() { if ge "$1" "$2"; then echo PASS; else echo FAIL; fi; } # value >= goal
within() { awk -v r="$1" 'BEGIN { exit !(r >= 0.8) }' && echo PASS || echo FAIL; } # no slower with the big backlog: big >= 80% of small

# busy: percent of CPU time the machine spent busy over the last second, so
# a run disturbed by other work says so.
busy() {
	local a b
	a=($(head -1 /proc/stat))
	sleep 1
	b=($(head -1 /proc/stat))
	awk -v u1="${a[1]}" -v n1="${a[2]}" -v s1="${a[3]}" -v i1="${a[4]}" -v w1="${a[5]}" \
		-v u2="${b[1]}" -v n2="${b[2]}" -v s2="${b[3]}" -v i2="${b[4]}" -v w2="${b[5]}" \
		'BEGIN { t = (u2+n2+s2+i2+w2) - (u1+n1+s1+i1+w1); printf "%.0f", (t > 0 ? 100 * ((u2+n2+s2) - (u1+n1+s1)) / t : 0) }'
}
# note_busy SECTION: wait (up to BENCH_QUIET_WAIT seconds) for the machine
# to be quiet, then say how busy it was; a disturbed section is flagged.
note_busy() {
	local b t0=$SECONDS
	b=$(busy)
	while ((b > 10 && SECONDS - t0 < QUIET_WAIT)); do
		sleep 4
		b=$(busy)
	done
	echo "   (machine busy before this step: ${b}% of CPU)"
	if ((b > 10)); then
		echo "   WARNING: other work is running; numbers below are disturbed" >&2
		DISTURBED="$DISTURBED $1"
	fi
}
DISTURBED=""

ROWS=()
row() { ROWS+=("| $1 | $2 | $3 | $4 |"); } # what, result, target, verdict

# ---- build ----
cd "$ROOT"
echo "== build ($(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ', work tree modified'))"
go build -o "$BIN/" ./cmd/... ./scripts/bench/mqbench
# The CLS under test runs as a copy named benchsrv: on a shared machine,
# someone stopping their own `cls serve` by name must not stop ours.
cp "$BIN/cls" "$BIN/benchsrv"
if ! command -v parallel >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "   installing GNU parallel (baseline of test 3)"
	apt-get install -y -qq parallel >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq parallel >/dev/null 2>&1; } || true
fi
echo "   machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | sed -n 1p), $(uname -sr)"
echo "   work dir: $WORK"
cd "$WORK"

# ---- 1. bulk submit ----
if [[ " $ONLY " == *" 1 "* ]]; then
	echo "== 1. bulk submit: $JOBS jobs through mqsub -f (--local 0)"
	gen=$("$BIN/mqbench" gen -targets $((JOBS / 10)) -per 10 -o "$WORK/jobs.jsonl")
	echo "   workload: $gen"
	echo "   (targets t0..t$((JOBS / 10 - 1)), 10 jobs each; every odd target's jobs have prereqs [the even target before it];"
	echo "    command like: $(sed -n 11p "$WORK/jobs.jsonl"))"
	H1=$WORK/h1
	start_cls "$H1" --local 0
	rss0=$(awk '/VmRSS/ { print $2 }' /proc/$CLS_PID/status)
	note_busy 1
	sub=$(MQ_HOME=$H1 "$BIN/mqbench" times -cls "$CLS_PID" -n 1 -warmup 0 -- "$BIN/mqsub" -f "$WORK/jobs.jsonl")
	sub_ms=$(kv "$sub" median_ms)
	sub_rate=$(awk -v n="$JOBS" -v ms="$sub_ms" 'BEGIN { printf "%.0f", n / (ms / 1000) }')
	total=$(MQ_HOME=$H1 "$BIN/mqstat" --summary | awk 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "TOTAL") c = i } $1 == "default" { print $c }')
	[ "$total" = "$JOBS" ] || { echo "bench: expected $JOBS jobs, mqstat --summary says $total" >&2; exit 1; }
	rss=$(awk '/VmRSS/ { printf "%.0f", $2 / 1024 }' /proc/$CLS_PID/status)
	hwm=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' /proc/$CLS_PID/status)
	MQ_HOME=$H1 "$BIN/mqstat" --summary | sed 's/^/   /'
	sum=$(MQ_HOME=$H1 "$BIN/mqbench" times -cls "$CLS_PID" -n 20 -warmup 3 -- "$BIN/mqstat" --summary)
	sum_med=$(kv "$sum" median_ms)
	echo "   mqsub -f: ${sub_ms} ms = $sub_rate jobs/s ($sub)"
	echo "   CLS memory with $JOBS jobs: VmRSS $rss MB, VmHWM $hwm MB (VmRSS $((rss0 / 1024)) MB when empty)"
	echo "   mqstat --summary x20: $sum"
	db=$(du -sm "$H1" | cut -f1)
	echo "   MQ_HOME on disk: $db MB"
	# Beyond the targets: memory after reading jobs back (a listing), and
	# after a restart that loads the jobs from disk.
	lst=$(MQ_HOME=$H1 "$BIN/mqbench" times -n 5 -warmup 0 -- "$BIN/mqstat" --json --limit 1000)
	rss_l=$(awk '/VmRSS/ { printf "%.0f", $2 / 1024 }' /proc/$CLS_PID/status)
	hwm_l=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' /proc/$CLS_PID/status)
	echo "   mqstat --json --limit 1000 x5: $lst; CLS afterwards: VmRSS $rss_l MB, VmHWM $hwm_l MB"
	stop_cls
	start_cls "$H1" --local 0
	sleep 1
	rss_r=$(awk '/VmRSS/ { printf "%.0f", $2 / 1024 }' /proc/$CLS_PID/status)
	hwm_r=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' /proc/$CLS_PID/status)
	echo "   restart with $JOBS jobs: ready in ${READY_S}s; VmRSS $rss_r MB, VmHWM $hwm_r MB"
	stop_cls
	row "1. mqsub -f, $JOBS jobs (wall)" "$sub_ms ms = **$sub_rate jobs/s**" ">= 100,000 jobs/s" "$(verdict "$sub_rate" 100000)"
	row "1. CLS memory, $JOBS jobs queued" "VmRSS **$rss MB**, VmHWM $hwm MB" "<= 300 MB" "$(ge 300 "$rss" && echo PASS || echo FAIL) (HWM $(ge 300 "$hwm" && echo PASS || echo FAIL))"
	row "1. (extra) CLS memory after 5 x mqstat --json --limit 1000" "VmRSS $rss_l MB, VmHWM $hwm_l MB; listing median $(kv "$lst" median_ms) ms" "(<= 300 MB)" "$(ge 300 "$rss_l" && echo PASS || echo FAIL)"
	row "1. (extra) CLS memory after a restart with $JOBS jobs" "VmRSS $rss_r MB, VmHWM $hwm_r MB; load ${READY_S}s" "(<= 300 MB)" "$(ge 300 "$rss_r" && echo PASS || echo FAIL)"
	row "1. mqstat --summary, $JOBS jobs" "median **$sum_med ms**, p90 $(kv "$sum" p90_ms) ms (20 runs)" "<= 100 ms" "$(ge 100 "$sum_med" && echo PASS || echo FAIL)"
fi

# ---- 2. scheduling path, no-op executor ----
if [[ " $ONLY " == *" 2 "* ]]; then
	echo "== 2. scheduling path: --noop, --sync full; ~1,000 pending vs $JOBS pending"
	for cfg in $SCHED; do
		P=${cfg%x*} S=${cfg#*x}
		echo "-- --local $P --slots $S"
		smalls=() bigs=()
		for ((rep = 1; rep <= REPEAT; rep++)); do
			H=$WORK/s$cfg-small
			note_busy 2
			start_cls "$H" --local "$P" --slots "$S" --noop --sync full
			small=$(MQ_HOME=$H "$BIN/mqbench" rate -cls "$CLS_PID" -feed 1000 -warmup 2s -window "${WINDOW}s")
			echo "   ~1,000 queued (topped up with 1,000 new jobs whenever fewer than 500 are pending): $small"
			smalls+=("$(kv "$small" jobs_per_s)")
			if ((rep == 1)); then
				burst=$(MQ_HOME=$H "$BIN/mqbench" rounds -cls "$CLS_PID" -rounds 20 -targets 100 -per 10)
				echo "   bursts (20 rounds: submit 1,000 to an idle CLS, time to all Done; for reference): $burst"
			fi
			stop_cls
			rm -rf "$H"
			H=$WORK/s$cfg-big
			cp -a "$WORK/h1" "$H"
			rm -f "$H/cls.sock" "$H/cls.lock"
			note_busy 2 # before starting: the placeholders drain at once
			start_cls "$H" --local "$P" --slots "$S" --noop --sync full
			echo "   CLS ready with $JOBS jobs in ${READY_S}s"
			big=$(MQ_HOME=$H "$BIN/mqbench" rate -cls "$CLS_PID" -warmup 2s -window "${WINDOW}s")
			echo "   $JOBS queued: $big"
			bigs+=("$(kv "$big" jobs_per_s)")
			stop_cls
			rm -rf "$H"
		done
		rs=$(median "${smalls[@]}") rb=$(median "${bigs[@]}")
		r=$(ratio "$rb" "$rs")
		runs=""
		if ((REPEAT > 1)); then runs=" (median of $REPEAT: ${smalls[*]})"; fi
		echo "   median: 1,000 queued $rs jobs/s, $JOBS queued $rb jobs/s; big/small = $r"
		row "2. noop --local $P --slots $S, 1,000 queued" "**$rs jobs/s**${runs}" ">= 10,000 jobs/s" "$(verdict "$rs" 10000)"
		if ((REPEAT > 1)); then runs=" (median of $REPEAT: ${bigs[*]})"; fi
		row "2. noop --local $P --slots $S, $JOBS queued" "**$rb jobs/s**${runs}; $r x the 1,000 case" ">= 10,000 jobs/s; no slower than the 1,000 case (within 20%)" "$(verdict "$rb" 10000); $(within "$r")"
	done
fi

# ---- 3. real processes vs GNU parallel ----
if [[ " $ONLY " == *" 3 "* ]]; then
	echo "== 3. real processes: $TRUE_JOBS x true, --local 2, vs GNU parallel -j2"
	"$BIN/mqbench" gen -targets 1 -per "$TRUE_JOBS" -prereqs=false -cmd true -o "$WORK/true.jsonl" >/dev/null
	have_par=1
	if ! command -v parallel >/dev/null 2>&1; then
		have_par=0
		echo "   GNU parallel is not installed: no baseline" >&2
	fi
	m1=() m2=() pars=() xas=()
	for ((rep = 1; rep <= REPEAT; rep++)); do
		note_busy 3
		if ((have_par)); then
			par=$("$BIN/mqbench" times -n 1 -warmup 0 -- sh -c "seq $TRUE_JOBS | parallel -j2 true")
			pars+=("$(awk -v n="$TRUE_JOBS" -v ms="$(kv "$par" median_ms)" 'BEGIN { printf "%.0f", n / (ms / 1000) }')")
			echo "   seq $TRUE_JOBS | parallel -j2 true: ${pars[-1]} jobs/s ($par)"
		fi
		xa=$("$BIN/mqbench" times -n 1 -warmup 0 -- sh -c "seq $TRUE_JOBS | xargs -P2 -n1 true")
		xas+=("$(awk -v n="$TRUE_JOBS" -v ms="$(kv "$xa" median_ms)" 'BEGIN { printf "%.0f", n / (ms / 1000) }')")
		echo "   seq $TRUE_JOBS | xargs -P2 -n1 true (fork/exec floor, for reference): ${xas[-1]} jobs/s ($xa)"
		for S in 1 2; do
			H=$WORK/h3-$S-$rep
			start_cls "$H" --local 2 --slots "$S"
			mq=$(MQ_HOME=$H "$BIN/mqbench" drain -cls "$CLS_PID" -n "$TRUE_JOBS" -- "$BIN/mqsub" -f "$WORK/true.jsonl")
			echo "   mq --local 2 --slots $S: $mq"
			stop_cls
			# (kept until the end: deleting thousands of output files makes ext4
			# scan for recently deleted inodes on every file created next)
			v=$(kv "$mq" jobs_per_s)
			if ((S == 1)); then m1+=("$v"); else m2+=("$v"); fi
		done
	done
	r1=$(median "${m1[@]}") r2=$(median "${m2[@]}") xa_rate=$(median "${xas[@]}")
	par_rate=0
	((have_par)) && par_rate=$(median "${pars[@]}")
	runs1="" runs2="" runsp=""
	if ((REPEAT > 1)); then
		runs1=" (median of $REPEAT: ${m1[*]})" runs2=" (median of $REPEAT: ${m2[*]})" runsp=" (median of $REPEAT: ${pars[*]-})"
	fi
	echo "   median: mq slots 1 $r1, mq slots 2 $r2, parallel $par_rate, xargs $xa_rate jobs/s"
	row "3. $TRUE_JOBS x true, --local 2 (slots 1), submit to all Done" "**$r1 jobs/s**$runs1; parallel -j2: $par_rate jobs/s$runsp; **$(ratio "$r1" "$par_rate") x parallel**" ">= 1,000 jobs/s and >= 3 x parallel" "$(verdict "$r1" 1000); $(verdict "$(ratio "$r1" "$par_rate")" 3)"
	row "3. same, --local 2 --slots 2 (extra)" "$r2 jobs/s$runs2; $(ratio "$r2" "$par_rate") x parallel; xargs -P2: $xa_rate jobs/s" "(information)" "-"
fi

# ---- 4. mqsub -b round trip ----
if [[ " $ONLY " == *" 4 "* ]]; then
	echo "== 4. mqsub -b t true round trip, $RTT_RUNS runs, idle CLS with --local 2"
	H=$WORK/h4
	start_cls "$H" --local 2
	sleep 1 # let the placeholders register and park
	note_busy 4
	rtt=$(MQ_HOME=$H "$BIN/mqbench" times -cls "$CLS_PID" -n "$RTT_RUNS" -warmup 5 -- "$BIN/mqsub" -b t true)
	echo "   mqsub -b t true: $rtt"
	sub1=$(MQ_HOME=$H "$BIN/mqbench" times -n 50 -warmup 3 -- "$BIN/mqsub" t true)
	echo "   mqsub t true (no wait, for reference): $sub1"
	tr=$("$BIN/mqbench" times -n 50 -warmup 3 -- /bin/true)
	echo "   /bin/true (process start, for reference): $tr"
	stop_cls
	med=$(kv "$rtt" median_ms)
	row "4. mqsub -b t true round trip" "median **$med ms**, p90 $(kv "$rtt" p90_ms) ms ($RTT_RUNS runs); mqsub without -b: median $(kv "$sub1" median_ms) ms" "median <= 20 ms" "$(ge 20 "$med" && echo PASS || echo FAIL)"
fi

# ---- 5. SSH placeholders ----
# ssh_setup HOME: a placeholder key and the host key's fingerprint (FP).
ssh_setup() {
	MQ_HOME=$1 "$BIN/cls" key new --role placeholder "$1/ph" >/dev/null
	FP=$(MQ_HOME=$1 "$BIN/cls" key host | sed -n 1p) # sed reads it all: head could leave cls a SIGPIPE, fatal under pipefail
}
# ssh_addr HOME: the address `cls serve --ssh 127.0.0.1:0` chose.
ssh_addr() {
	local a i
	for ((i = 0; i < 100; i++)); do # the socket may answer before the SSH port is announced
		a=$(sed -n 's/^cls: SSH on \([^,]*\),.*/\1/p' "$1/serve.err" | tail -1)
		[ -n "$a" ] && { echo "$a"; return 0; }
		sleep 0.1
	done
	echo "bench: the CLS announced no SSH address in $1/serve.err" >&2
	return 1
}
# start_agents HOME N ARGS...: N agents over SSH, recorded for cleanup.
start_agents() {
	local home=$1 n=$2 i addr
	shift 2
	addr=$(ssh_addr "$home") || exit 1
	for ((i = 0; i < n; i++)); do
		MQ_HOME=$home/agent "$BIN/cls" agent --cls "$addr" --host-key "$FP" --key "$home/ph" \
			--site ssh --host "a$i" --out "$home/agent/out" "$@" 2>>"$home/agents.err" &
		PIDS+=("$!")
		AGENT_PIDS+=("$!")
	done
}
stop_agents() {
	local p keep=()
	for p in "${AGENT_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${AGENT_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do [[ " ${AGENT_PIDS[*]} " == *" $p "* ]] || keep+=("$p"); done
	PIDS=("${keep[@]+"${keep[@]}"}")
	AGENT_PIDS=()
}
AGENT_PIDS=()
if [[ " $ONLY " == *" 5 "* ]]; then
	echo "== 5. SSH placeholders: $TRUE_JOBS x true through 2 agents over SSH vs 2 local placeholders"
	"$BIN/mqbench" gen -targets 1 -per "$TRUE_JOBS" -prereqs=false -cmd true -o "$WORK/true5.jsonl" >/dev/null
	loc=() rem=()
	for ((rep = 1; rep <= REPEAT; rep++)); do
		note_busy 5
		H=$WORK/h5-local-$rep
		start_cls "$H" --local 2
		mq=$(MQ_HOME=$H "$BIN/mqbench" drain -cls "$CLS_PID" -n "$TRUE_JOBS" -- "$BIN/mqsub" -f "$WORK/true5.jsonl")
		echo "   local: --local 2: $mq"
		loc+=("$(kv "$mq" jobs_per_s)")
		stop_cls
		H=$WORK/h5-ssh-$rep
		mkdir -p "$H"
		ssh_setup "$H"
		start_cls "$H" --local 0 --ssh 127.0.0.1:0
		start_agents "$H" 2
		mq=$(MQ_HOME=$H "$BIN/mqbench" drain -cls "$CLS_PID" -n "$TRUE_JOBS" -- "$BIN/mqsub" -f "$WORK/true5.jsonl")
		echo "   ssh: 2 agents over SSH: $mq"
		rem+=("$(kv "$mq" jobs_per_s)")
		stop_agents
		stop_cls
	done
	rl=$(median "${loc[@]}") rr=$(median "${rem[@]}")
	row "5. $TRUE_JOBS x true, 2 agents over SSH vs --local 2 (same run)" "SSH **$rr jobs/s**, local $rl jobs/s: **$(ratio "$rr" "$rl")** of local" ">= 0.8 of local" "$(verdict "$(ratio "$rr" "$rl")" 0.8)"

	echo "== 5. $AGENTS agents connected over SSH"
	H=$WORK/h5-many
	mkdir -p "$H"
	ssh_setup "$H"
	start_cls "$H" --local 0 --ssh 127.0.0.1:0
	sleep 1
	rss0=$(awk '/VmRSS/ { print $2 }' /proc/$CLS_PID/status)
	start_agents "$H" "$AGENTS"
	sleep 2 # let them connect and register
	note_busy 5
	# a minute of work for every agent, so they all run jobs while we measure
	"$BIN/mqbench" gen -targets 1 -per $((AGENTS * 60)) -prereqs=false -cmd "sleep 1" -o "$WORK/sleep5.jsonl" >/dev/null
	MQ_HOME=$H "$BIN/mqsub" -f "$WORK/sleep5.jsonl" >/dev/null
	sleep 3
	running=$(MQ_HOME=$H "$BIN/mqstat" --summary | awk '$1 == "default" { print $0 }')
	sum=$(MQ_HOME=$H "$BIN/mqbench" times -n 20 -warmup 3 -- "$BIN/mqstat" --summary)
	lst=$(MQ_HOME=$H "$BIN/mqbench" times -n 20 -warmup 3 -- "$BIN/mqstat" -s E)
	rss1=$(awk '/VmRSS/ { print $2 }' /proc/$CLS_PID/status)
	per=$(awk -v a="$rss0" -v b="$rss1" -v n="$AGENTS" 'BEGIN { printf "%.2f", (b - a) / 1024 / n }')
	echo "   while running (QUEUE W Q E D F B X TOTAL: $running)"
	echo "   mqstat --summary x20: $sum"
	echo "   mqstat -s E x20 (lists the ~$AGENTS running jobs): $lst"
	echo "   CLS VmRSS: $((rss0 / 1024)) MB before the agents, $((rss1 / 1024)) MB with $AGENTS agents working: $per MB per agent"
	stop_agents
	stop_cls
	row "5. $AGENTS agents over SSH running sleep 1 jobs: mqstat" "--summary median **$(kv "$sum" median_ms) ms**; -s E median **$(kv "$lst" median_ms) ms**, p90 $(kv "$lst" p90_ms) ms" "<= 100 ms" "$(ge 100 "$(kv "$lst" median_ms)" && echo PASS || echo FAIL)"
	row "5. $AGENTS agents over SSH: CLS RSS growth" "**$per MB per agent** ($((rss0 / 1024)) -> $((rss1 / 1024)) MB)" "<= 1 MB per agent" "$(ge 1 "$per" && echo PASS || echo FAIL)"
fi

# ---- results ----
{
	echo
	echo "Results ($(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), BENCH_JOBS=$JOBS):"
	echo
	echo "| measurement | result | target | verdict |"
	echo "| --- | --- | --- | --- |"
	printf '%s\n' "${ROWS[@]}"
	if [ -n "$DISTURBED" ]; then
		echo
		echo "WARNING: the machine was busy with other work before test(s)$DISTURBED; rerun those on a quiet machine."
	fi
} | tee ${BENCH_OUT:+"$BENCH_OUT"}
