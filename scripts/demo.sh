#!/usr/bin/env bash
# Builds mq, starts a CLS with local placeholders (the embedded default: no
# cluster needed) and runs a sample workflow to completion: a small PA-style
# proteome analysis, per protein a BLAST-like job then a Parse-like job that
# reads its output, then one summary job that needs every Parse.
#
#   scripts/demo.sh              # in a fresh temporary MQ_HOME
#   MQ_HOME=~/.mq scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
go build -o bin/ ./cmd/...
export PATH=$PWD/bin:$PATH
export MQ_HOME=${MQ_HOME:-$(mktemp -d /tmp/mq-demo.XXXXXX)}
work=$(mktemp -d /tmp/mq-demo-work.XXXXXX)

cls serve --local "${LOCAL:-4}" &
cls_pid=$!
trap 'kill $cls_pid 2>/dev/null; wait $cls_pid 2>/dev/null; rm -rf "$work"' EXIT
# The socket exists once the CLS has opened its home; a request sent then
# waits until the CLS can take it. A busy machine may take a while.
for _ in $(seq 1200); do
	[ -S "$MQ_HOME/cls.sock" ] && break
	kill -0 $cls_pid 2>/dev/null || { echo "demo: cls serve exited" >&2; exit 1; }
	sleep 0.05
done
[ -S "$MQ_HOME/cls.sock" ] || { echo "demo: the CLS did not open $MQ_HOME/cls.sock in 60 s" >&2; exit 1; }

proteins=${PROTEINS:-20}
cd "$work"
echo "== submitting $proteins proteins (BLAST then Parse), then a summary"
# Parse jobs go in first: a prerequisite target with no jobs yet just waits.
for i in $(seq "$proteins"); do
	mqsub -q pa -p "p${i}BLAST" "p${i}Parse" "grep -c hit p$i.blast > p$i.parsed" >/dev/null
done
for i in $(seq "$proteins"); do
	mqsub -q pa --est 0.2 "p${i}BLAST" "sleep 0.$((RANDOM % 5)); for h in 1 2 3; do echo hit \$h of protein $i; done > p$i.blast" >/dev/null
done
prereqs=$(seq -s, -f 'p%gParse' "$proteins")
mqstat --summary
echo "== waiting for the summary job (mqsub -b)"
mqsub -b -q pa -p "$prereqs" summary 'echo "hits: $(cat p*.parsed | awk "{s += \$1} END {print s}")"' >summary.id
id=$(cat summary.id)
mqstat -j "$id"
echo "== summary job output:"
mqstat --cat "$id"
mqstat --summary
echo "== done; MQ_HOME=$MQ_HOME (the CLS stops now)"
