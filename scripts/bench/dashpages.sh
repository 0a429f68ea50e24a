#!/usr/bin/env bash
# What the dashboard's pages cost at scale: a CLS holding DASHPAGES_JOBS
# ended jobs (half one array, half one job a target in chains of ten, in
# two queues) and DASHPAGES_QUEUES more queues of one held job each; each
# page is fetched DASHPAGES_N times with the token and the CLS's CPU time
# (utime+stime, 10 ms ticks) per request is reported with the page's size
# and wall time. Pages read one page of jobs or in-memory aggregates, so
# only the listings that match few jobs (a scan) should grow with the jobs.
#
# Usage: scripts/bench/dashpages.sh    Knobs: DASHPAGES_JOBS (100000),
# DASHPAGES_QUEUES (0), DASHPAGES_N (100), DASHPAGES_BIN (use these
# binaries instead of building). Not for CI.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
JOBS=${DASHPAGES_JOBS:-100000}
QUEUES=${DASHPAGES_QUEUES:-0}
N=${DASHPAGES_N:-100}
WORK=$(mktemp -d /tmp/mqdashpages.XXXXXX)
BIN=${DASHPAGES_BIN:-$WORK/bin}
CLS_PID=
cleanup() {
	local rc=$?
	[ -n "$CLS_PID" ] && kill -TERM "$CLS_PID" 2>/dev/null && wait "$CLS_PID" 2>/dev/null
	rm -rf "$WORK"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${DASHPAGES_BIN:-}" ]; then
	(cd "$ROOT" && go build -o "$BIN/" ./cmd/cls ./cmd/mqsub ./cmd/mqwait ./scripts/bench/mqbench)
fi
export MQ_HOME=$WORK/home
mkdir -m 700 "$MQ_HOME"
"$BIN/cls" serve --local 2 --slots 8 --noop --http 127.0.0.1:0 2>"$WORK/serve.err" &
CLS_PID=$!
"$BIN/mqbench" ready -timeout 5m

half=$((JOBS / 2))
"$BIN/mqsub" --array "1-$half" -q big sweep 'echo {}' >/dev/null
awk -v n="$((JOBS - half))" 'BEGIN { for (i = 0; i < n; i++) {
	p = (i % 10) ? sprintf(",\"prereqs\":[\"t%d\"]", i - 1) : ""
	printf "{\"target\":\"t%d\",\"command\":\"true\",\"queue\":\"many\"%s}\n", i, p } }' | "$BIN/mqsub" -f - >/dev/null
awk -v n="$QUEUES" 'BEGIN { for (i = 0; i < n; i++)
	printf "{\"target\":\"q%d\",\"command\":\"true\",\"queue\":\"exp-%05d\",\"hold\":true}\n", i, i }' |
	{ ((QUEUES)) && "$BIN/mqsub" -f - >/dev/null || true; }
"$BIN/mqwait" -Q -q big
"$BIN/mqwait" -Q -q many

base=$(cat "$MQ_HOME/http.url")
base=${base%/}
auth="Authorization: Bearer $(cat "$MQ_HOME/http.token")"
cpu() { awk '{ print $14 + $15 }' "/proc/$CLS_PID/stat"; }
echo "== $JOBS jobs, $((QUEUES + 2)) queues: per request, CLS CPU and wall time ($N requests each)"
for p in / /jobs "/jobs?after=$((JOBS - 1000))" "/jobs?state=F" "/jobs?target=nosuch" "/jobs?target=t49" "/job/$((half / 2))" /target/sweep /target/t49 /metrics; do
	for ((i = 0; i < N; i++)); do
		printf 'url = "%s"\noutput = "/dev/null"\n' "$base$p"
	done >"$WORK/urls"
	c0=$(cpu) t0=$(date +%s%N)
	curl -s -K "$WORK/urls" -H "$auth" >/dev/null
	t1=$(date +%s%N) c1=$(cpu)
	size=$(curl -s -H "$auth" "$base$p" | wc -c)
	printf '%-28s %8d bytes  %7.1f ms CPU  %7.1f ms wall\n' "$p" "$size" \
		"$(awk -v c="$((c1 - c0))" -v n="$N" 'BEGIN { print c * 10 / n }')" \
		"$(awk -v t="$((t1 - t0))" -v n="$N" 'BEGIN { print t / 1e6 / n }')"
done
echo "CLS RSS $(awk '/VmRSS/ { print $2 / 1024 " MiB" }' "/proc/$CLS_PID/status"); load: $(cut -d' ' -f1-3 /proc/loadavg)"
