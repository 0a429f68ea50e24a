#!/usr/bin/env bash
# A randomized crash soak of the real binaries: test/e2e's TestSoak,
# which the suite skips. For SECONDS it submits single jobs (some with
# -o/-e files, some held, some waited on with mqsub -b), arrays, chains
# with -p and --after-any, failing jobs; it races mqdel, mqhold, mqrls,
# mqalter and mqwait against a SIGKILL of the CLS or of a placeholder, a
# placeholder SIGSTOPped past its lease, or (as root, on a 48 MiB tmpfs
# MQ_HOME) a full disk, and after each round checks what the restarted
# CLS holds: every acknowledged job listed once with its target, a
# submit of unknown outcome all or nothing, holds and deletes in force,
# no attempt run twice, no job done before its prerequisites, mqwait's
# and mqsub -b's "done" kept, the summary equal to the listing, each
# done job's output (mqstat --cat, its -o and -e files) there once. At
# the end it releases every hold, waits for every job to end and checks
# each ended as semantics.md says. Run one soak at a time.
#
# Usage: scripts/soak.sh [SECONDS] [SEED]
#   SECONDS  how long to submit and break things (default 300)
#   SEED     replays a run's choices (its timing differs); printed first
#   MQ_SOAK_EVENT=N  only event N: 0-4 kill the CLS, 5-6 a placeholder,
#                    7 stop a placeholder, 8 fill MQ_HOME, 9 nothing
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
export MQ_SOAK_SECONDS=$secs
[ $# -ge 2 ] && export MQ_SOAK_SEED=$2
[ "$(id -u)" = 0 ] && export MQ_SOAK_TMPFS=1
exec go test -count=1 -timeout "$((secs * 3 + 600))s" -tags e2e ./test/e2e -run '^TestSoak$' -v
