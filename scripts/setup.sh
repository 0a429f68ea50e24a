#!/usr/bin/env bash
# Installs what the test suites need, idempotently. Run as root where
# packages must be installed; without root it checks and explains instead.
# The core suites need only Go; the SSH suite needs the OpenSSH client
# (its tests skip, saying so, without it); batch-system suites of later
# work add their packages here.
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

# apt_install PKG: install a Debian package quietly, updating the package
# lists once if they are stale or empty.
apt_install() {
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq --no-install-recommends "$1" >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends "$1" >/dev/null 2>&1; }
}

# The OpenSSH client (ssh, ssh-keygen) for the e2e SSH interoperability tests.
if ! need ssh && [ "$(id -u)" = 0 ] && need apt-get; then
	apt_install openssh-client ||
		echo "setup: could not install openssh-client (the e2e SSH tests will skip)" >&2
fi
if ! need ssh; then
	echo "setup: ssh (openssh-client) is missing; the e2e SSH tests will skip (run this script as root to install it)" >&2
fi

# GNU parallel is only for the benchmark baseline; install it when we can.
if ! need parallel && [ "$(id -u)" = 0 ] && need apt-get; then
	apt_install parallel ||
		echo "setup: could not install GNU parallel (only the benchmarks use it)" >&2
fi
exit 0
