#!/usr/bin/env bash
# The whole test suite: static checks, unit tests (go test ./...), the race
# detector on the concurrent core, and the end-to-end suites that drive the
# real binaries (and, where issues need them, real sshd/SGE/Slurm that
# scripts/setup.sh installs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH=/usr/local/go/bin:$PATH

# Each stage's header says when it began, so that a slow run says where.
stage() { echo "== $1 ($(date -u +%T))"; }

stage gofmt
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then echo "gofmt would change: $bad" >&2; exit 1; fi
stage "go mod tidy"
if ! tidy=$(go mod tidy -diff); then
	echo "go.mod/go.sum are not tidy (run go mod tidy):" >&2
	echo "$tidy" >&2
	exit 1
fi
stage "go vet"
# With the e2e tag: every package, the end-to-end suites' files too (no
# file is built only without it).
go vet -tags e2e ./...
# The core's and the commands' packages run their tests once, under the
# race detector (below), every test of them: not here a second time
# without it (two minutes of the run's two cores).
race_pkgs=(./cmd/internal/cli/... ./cmd/internal/clscmd/... ./cmd/internal/agentcmd/... ./internal/dag/...
	./internal/metaqueue/... ./internal/server/... ./client/... ./internal/placeholder/... ./internal/sshserver/... ./driver/...)
race=1
command -v gcc >/dev/null 2>&1 || race=0 # the race detector needs cgo
stage "unit tests"
if [ "$race" = 1 ]; then
	go test -count=1 -timeout 10m $(go list ./... | grep -vxF -f <(go list "${race_pkgs[@]}"))
else
	go test -count=1 -timeout 10m ./...
fi

# The sites suite (test/sites: real SGE, Slurm and PBS) takes ~16 minutes
# alone and ~21 beside the stages below, using about one core (its login
# hosts' sshd and the batch commands the CLS runs): as long as the e2e and
# race stages together. It runs beside them, in its
# own process group (ended if the script stops early); its output comes
# at the end. (Beside the unit tests too, it slowed them twofold: the
# machine's two cores, not the waits, bound those stages.)
# The suites run their tests one at a time: the run is bound by its two
# cores. With sites tests on different batch systems at once and e2e tests
# four at a time it took 25.3 minutes against 26.1, the load average near 9.
sites_log=$(mktemp)
stage "sites (real batch systems), beside the stages below"
setsid -w go test -count=1 -tags e2e -timeout 45m ./test/sites >"$sites_log" 2>&1 &
sites=$!
trap 'kill -- -$sites 2>/dev/null || true; rm -f "$sites_log"' EXIT

stage "end-to-end (real binaries)"
go test -count=1 -tags e2e -timeout 45m $(go list -tags e2e ./test/... | grep -v '/test/sites$')
stage "race detector (core and command packages)"
if [ "$race" = 1 ]; then
	# SQLite's engine (modernc.org/sqlite/lib, its C translated to Go) is
	# built without the race detector's instrumentation: instrumented, it
	# made every test that opens a store several times slower (the core's
	# tests 308 s against 111 s here) and the race run the longest part
	# of CI. Its libc stays instrumented: its locks are the synchronization
	# the detector must see (with libc left out too it reported races
	# inside encoding/json's cache). mq's own packages are instrumented
	# as before: the run looks for races in mq's code, not in SQLite's.
	go test -count=1 -race -gcflags='modernc.org/sqlite/lib=-race=false' -timeout 20m "${race_pkgs[@]}"
else
	echo "skipped: the race detector needs cgo (gcc); their tests ran without it above"
fi
stage "sites (real batch systems): waiting for it"
rc=0
wait "$sites" || rc=$?
cat "$sites_log"
exit "$rc"
