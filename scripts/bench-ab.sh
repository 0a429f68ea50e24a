#!/usr/bin/env bash
# Same-run A/B of scripts/bench.sh: the revision BASE (default the commit a
# change started from) against the work tree, alternated BASE, new, BASE,
# new, ... BENCH_AB_ROUNDS times each (default 3), so drift of the machine
# falls on both alike. Prints, per row of bench.sh's results table, the
# median of the first bold figure of each side and new/base.
#
# Usage: scripts/bench-ab.sh BASE [bench.sh knobs in the environment]
#   e.g. BENCH_JOBS=100000 BENCH_ONLY="1 2 3 4 5" scripts/bench-ab.sh 71f8419
# BASE's own scripts/bench.sh runs BASE (a revision measures itself as it
# was measured then). Wants a quiet machine, as bench.sh does.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BASE=${1:?usage: scripts/bench-ab.sh BASE (a git revision)}
ROUNDS=${BENCH_AB_ROUNDS:-3}
base_rev=$(git -C "$ROOT" rev-parse --verify --short "$BASE^{commit}") || { echo "bench-ab: $BASE is not a revision" >&2; exit 2; }
OUT=$(mktemp -d /tmp/mqab.XXXXXX)
WT=$OUT/base
git -C "$ROOT" worktree add -q --detach "$WT" "$base_rev"
trap 'git -C "$ROOT" worktree remove --force "$WT" >/dev/null 2>&1 || true; rm -rf "$OUT"' EXIT
echo "== A/B: base $base_rev against $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD || echo ' (work tree modified)'), $ROUNDS rounds each, alternated"
for ((i = 1; i <= ROUNDS; i++)); do
	for side in base new; do
		dir=$ROOT
		[ "$side" = base ] && dir=$WT
		echo "-- round $i: $side"
		BENCH_OUT=$OUT/$side.$i.md "$dir/scripts/bench.sh" >"$OUT/$side.$i.log" 2>&1 || { echo "bench-ab: $side round $i failed; its log:" >&2; tail -20 "$OUT/$side.$i.log" >&2; exit 1; }
	done
done
# The first bold figure of each row's result, per side and round.
figures() { # side
	for f in "$OUT/$1".*.md; do
		awk -F'|' '/^\| [0-9]/ { m = $3; if (match(m, /\*\*[0-9.,]+/)) { v = substr(m, RSTART + 2, RLENGTH - 2); gsub(",", "", v); print $2 "\t" v } }' "$f"
	done
}
echo
echo "| measurement | base $base_rev (median) | new (median) | new/base | base, new by round |"
echo "| --- | --- | --- | --- | --- |"
join -t $'\t' <(figures base | sort | awk -F'\t' '{ a[$1] = a[$1] " " $2 } END { for (k in a) print k "\t" a[k] }' | sort) \
	<(figures new | sort | awk -F'\t' '{ a[$1] = a[$1] " " $2 } END { for (k in a) print k "\t" a[k] }' | sort) |
	awk -F'\t' 'function med(s,   n, v, i, j, t) { n = split(s, v, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t } return (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
		{ b = med($2); n = med($3); printf "|%s| %s | %s | %s |%s;%s |\n", $1, b, n, (b > 0 ? sprintf("%.2f", n / b) : "n/a"), $2, $3 }'
echo
echo "(higher is better for rates, lower for times and memory: read each row by its unit in bench.sh's table)"
