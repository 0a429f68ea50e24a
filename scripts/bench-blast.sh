#!/usr/bin/env bash
# BLAST+ on mq with cores per job: real blastp searches of a protein set
# split in chunks, each job `blastp -num_threads 2` submitted with
# `mqsub --cpus 2`, on 2 local placeholders of 4 cores (cls serve --local 2
# --slots 4). Checks, in the same run:
#
#   - packing: per placeholder, the cores of the jobs it ran at once
#     (from the jobs' own start and end stamps, and the placeholder each
#     ran on per mqstat -j) never pass 4, and some moment has 4 (two jobs
#     side by side); a sampler also counts the blastp processes under each
#     placeholder every 0.2 s (never more than 2);
#   - results: the hits (blastp -outfmt 6, sorted) equal those of the same
#     chunks run directly, without mq.
#
# The proteins are synthetic (seeded: a database of BLAST_DB random proteins
# and BLAST_CHUNKS x 8 queries, each a mutated copy of a database member),
# so hits exist and the run is the same every time; the searches are real.
#
# Usage: scripts/bench-blast.sh            (installs ncbi-blast+ when missing)
# Knobs: BLAST_DB (proteins in the database, 2000), BLAST_CHUNKS (jobs, 24),
# BLAST_KEEP=1 keeps the work directory.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DBN=${BLAST_DB:-2000}
CHUNKS=${BLAST_CHUNKS:-24}
if ! command -v blastp >/dev/null || ! command -v makeblastdb >/dev/null; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ncbi-blast+ >/dev/null
fi
WORK=$(mktemp -d /tmp/mqblast.XXXXXX) # short: MQ_HOME holds a Unix socket
CLS_PID=
cleanup() {
	if [ -n "$CLS_PID" ]; then
		kill -TERM "$CLS_PID" 2>/dev/null || true
		wait "$CLS_PID" 2>/dev/null || true
	fi
	[ -n "${SAMPLER:-}" ] && kill "$SAMPLER" 2>/dev/null || true
	[ "${BLAST_KEEP:-}" = 1 ] && echo "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
BIN=$WORK/bin
mkdir -p "$BIN" "$WORK/data" "$WORK/direct" "$WORK/mq" "$WORK/stamps"
(cd "$ROOT" && go build -o "$BIN/" ./cmd/cls ./cmd/mqsub ./cmd/mqstat ./cmd/mqwait)
export PATH=$BIN:$PATH

# ---- data ----
python3 - "$WORK/data" "$DBN" "$CHUNKS" <<'EOF'
import random, sys
out, n, chunks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(1)
aa = "ACDEFGHIKLMNPQRSTVWY"
db = ["".join(rng.choice(aa) for _ in range(rng.randint(200, 450))) for _ in range(n)]
with open(f"{out}/db.fa", "w") as f:
    for i, s in enumerate(db):
        f.write(f">p{i}\n{s}\n")
for c in range(chunks):
    with open(f"{out}/q{c}.fa", "w") as f:
        for k in range(8):
            src = db[rng.randrange(n)]
            q = "".join(rng.choice(aa) if rng.random() < 0.25 else x for x in src)
            f.write(f">q{c}_{k}\n{q}\n")
EOF
makeblastdb -in "$WORK/data/db.fa" -dbtype prot -out "$WORK/data/db" >/dev/null
search() { # CHUNK OUT
	blastp -query "$WORK/data/q$1.fa" -db "$WORK/data/db" -num_threads 2 -outfmt 6 -evalue 1e-5 -max_target_seqs 5 >"$2"
}

# ---- without mq ----
t0=$EPOCHREALTIME
for c in $(seq 0 $((CHUNKS - 1))); do search "$c" "$WORK/direct/q$c.tsv"; done
direct_s=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')

# ---- on mq ----
export MQ_HOME=$WORK/home
mkdir -p "$MQ_HOME"
cls serve --local 2 --slots 4 2>>"$WORK/serve.err" &
CLS_PID=$!
deadline=$((SECONDS + 600))
until mqstat --summary >/dev/null 2>&1; do
	((SECONDS < deadline)) || { echo "bench-blast: the CLS did not answer in 10 minutes" >&2; cat "$WORK/serve.err" >&2; exit 1; }
	sleep 0.2
done
# The sampler: blastp processes under each local placeholder (children of
# the CLS), every 0.2 s; the most seen under one placeholder at once.
(
	most=0
	while kill -0 "$CLS_PID" 2>/dev/null; do
		for ph in $(pgrep -P "$CLS_PID" 2>/dev/null); do
			n=0
			for p in $(pgrep -P "$ph" 2>/dev/null); do
				n=$((n + $(pgrep -c -P "$p" -x blastp 2>/dev/null || true)))
			done
			((n > most)) && most=$n && echo "$most" >"$WORK/sampled"
		done
		sleep 0.2
	done
) &
SAMPLER=$!
echo 0 >"$WORK/sampled"
t0=$EPOCHREALTIME
ids=()
for c in $(seq 0 $((CHUNKS - 1))); do
	cmd="echo \$(date +%s.%N) >$WORK/stamps/$c.start; blastp -query $WORK/data/q$c.fa -db $WORK/data/db -num_threads 2 -outfmt 6 -evalue 1e-5 -max_target_seqs 5 >$WORK/mq/q$c.tsv; echo \$(date +%s.%N) >$WORK/stamps/$c.end"
	ids+=("$(mqsub -q blast --cpus 2 "chunk$c" "$cmd")")
done
mqwait "${ids[@]}" >/dev/null
mq_s=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
failed=$(mqstat -q blast -s FXB --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')

# ---- packing: cores at once per placeholder, from the jobs' stamps ----
: >"$WORK/events"
for i in "${!ids[@]}"; do
	ph=$(mqstat -j "${ids[$i]}" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["placeholder"])')
	echo "$ph $(cat "$WORK/stamps/$i.start") 2" >>"$WORK/events"
	echo "$ph $(cat "$WORK/stamps/$i.end") -2" >>"$WORK/events"
done
read -r most_cores placeholders < <(sort -k1,1n -k2,2n -k3,3n "$WORK/events" | awk '
	{ if ($1 != ph) { ph = $1; c = 0; n++ } c += $3; if (c > m) m = c } END { print m, n }')

# ---- results ----
same=yes
for c in $(seq 0 $((CHUNKS - 1))); do
	if ! cmp -s <(sort "$WORK/direct/q$c.tsv") <(sort "$WORK/mq/q$c.tsv"); then
		same=no
		echo "bench-blast: chunk $c: hits differ from the direct run" >&2
	fi
done
hits=$(cat "$WORK/direct/"*.tsv | wc -l)
sampled=$(cat "$WORK/sampled")

echo "| figure | value | target |"
echo "|---|---|---|"
echo "| jobs (blastp -num_threads 2, --cpus 2) | $CHUNKS ($failed not done) | all done |"
echo "| most cores at once on one placeholder (stamps) | $most_cores (over $placeholders placeholders) | <= 4, and 4 reached |"
echo "| most blastp processes under one placeholder (sampled every 0.2 s) | $sampled | <= 2 |"
echo "| hits equal to the direct run | $same ($hits hits) | yes |"
echo "| wall time: direct, serial / on mq | ${direct_s} s / ${mq_s} s | |"
ok=1
[ "$failed" = 0 ] || ok=0
[ "$most_cores" -le 4 ] && [ "$most_cores" -ge 4 ] || ok=0
[ "$sampled" -le 2 ] || ok=0
[ "$same" = yes ] || ok=0
if [ "$ok" = 1 ]; then echo "bench-blast: PASS"; else echo "bench-blast: FAIL"; exit 1; fi
