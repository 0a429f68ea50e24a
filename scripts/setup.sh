#!/usr/bin/env bash
# Installs what the test suites need, idempotently. Run as root where
# packages must be installed; without root it checks and explains instead.
# Today the core suites need only Go; the SSH and batch-system suites of
# later work add their packages here.
set -euo pipefail

need() { command -v "$1" >/dev/null 2>&1; }

if ! need go; then
	if [ -x /usr/local/go/bin/go ]; then
		export PATH=/usr/local/go/bin:$PATH
	else
		echo "setup: Go is not installed (https://go.dev/dl); mq needs Go >= 1.24" >&2
		exit 1
	fi
fi

# GNU parallel is only for the benchmark baseline; install it when we can.
if ! need parallel && [ "$(id -u)" = 0 ] && need apt-get; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq --no-install-recommends parallel >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends parallel >/dev/null 2>&1; } ||
		echo "setup: could not install GNU parallel (only the benchmarks use it)" >&2
fi
exit 0
