#!/usr/bin/env bash
# Installs what the test suites need, idempotently. Run as root where
# packages must be installed; without root it checks and explains instead.
# The core suites need only Go. The SSH suite (test/e2e) needs the OpenSSH
# client; the sites suite (test/sites) also needs an OpenSSH server (the
# "login host"), Son of Grid Engine and Slurm from Debian's packages, and an
# unprivileged user (mquser) to submit as, and a second one (mquser2) for
# the staging tests' other site; the daemons themselves are started
# by scripts/sge.sh and scripts/slurm.sh. A real OpenPBS, where one is
# vendored beside the repository (../shared/vendor/openpbs), is installed and
# started by scripts/pbs.sh, with its own user mqpbs. Suites whose parts are
# missing skip, saying so.
set -euo pipefail

need() { command -v "$1" >/dev/null 2>&1; }

if ! need go; then
	if [ -x /usr/local/go/bin/go ]; then
		export PATH=/usr/local/go/bin:$PATH
	else
		echo "setup: Go is not installed (https://go.dev/dl); mq needs Go >= 1.26.8, as go.mod says" >&2
		exit 1
	fi
fi

if [ "$(id -u)" != 0 ] || ! need apt-get; then
	echo "setup: not root (or no apt-get): not installing sshd, SGE, Slurm; the sites suite will skip" >&2
	need ssh || echo "setup: ssh (openssh-client) is missing; the e2e SSH tests will skip" >&2
	need chromium || echo "setup: chromium is missing; the dashboard's browser test will skip" >&2
	need snakemake || echo "setup: snakemake is missing; the e2e Snakemake tests will skip" >&2
	need makeflow || echo "setup: makeflow (coop-computing-tools) is missing; the e2e Makeflow tests will skip" >&2
	need zsh || echo "setup: zsh is missing; the e2e zsh completion test will skip" >&2
	need fish || echo "setup: fish is missing; the e2e fish completion test will skip" >&2
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive

# Never let a package start its daemon (sshd on port 22, qmaster under the
# wrong host name): our scripts start them as the tests need.
if [ ! -x /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
fi

updated=
pkgs() { # install PACKAGES... unless every one is installed
	local missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} = 0 ] && return 0
	if [ -z "$updated" ]; then apt-get update -qq >/dev/null 2>&1 || true; updated=1; fi
	# Wait for another apt (a shared machine) rather than fail at once.
	apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# GNU parallel is only for the benchmark baseline.
pkgs parallel || echo "setup: could not install GNU parallel (only the benchmarks use it)" >&2
# Headless Chromium renders the dashboard in test/e2e/web_test.go (fonts so
# its screenshots have text).
pkgs chromium fonts-dejavu-core || echo "setup: could not install Chromium; the dashboard browser test will skip" >&2

# The shells whose completion `cls docs` writes (test/e2e/habits_test.go
# drives each one; bash is always there).
pkgs zsh fish || echo "setup: could not install zsh and fish; their completion tests will skip" >&2

# The workflow systems mq runs under (test/e2e/workflow_test.go): Snakemake 7
# and Makeflow (cctools). Debian's makeflow calls MPI_Init at start, so it
# needs Open MPI's runtime (openmpi-bin) even for other batch types.
pkgs snakemake coop-computing-tools openmpi-bin ||
	echo "setup: could not install Snakemake and Makeflow; their e2e tests will skip" >&2

if ! pkgs openssh-server openssh-client; then
	echo "setup: could not install OpenSSH; the sites suite will skip" >&2
	exit 0
fi

H=$(hostname)
for p in gridengine-common gridengine-client gridengine-master gridengine-exec; do
	echo "$p shared/gridengineconfig boolean true"
	echo "$p shared/gridenginecell string default"
	echo "$p shared/gridenginemaster string $H"
done | debconf-set-selections
pkgs gridengine-master gridengine-exec gridengine-client ||
	echo "setup: could not install Son of Grid Engine; SGE tests will skip" >&2
pkgs munge slurmctld slurmd slurm-client ||
	echo "setup: could not install Slurm; Slurm tests will skip" >&2

# The user placeholders are submitted as (SGE refuses root: min_uid 1000).
if ! id mquser >/dev/null 2>&1; then
	useradd -m -s /bin/bash mquser
fi
usermod -p '*' mquser # useradd leaves the account locked ('!'); sshd refuses locked accounts
install -d -m 700 -o mquser -g mquser ~mquser/.ssh
# A second site's account (the staging tests' other administrative
# domain): its home is its own, unreadable by mquser, and mquser's by it.
if ! id mquser2 >/dev/null 2>&1; then
	useradd -m -s /bin/bash mquser2
fi
usermod -p '*' mquser2
chmod 700 ~mquser2
install -d -m 700 -o mquser2 -g mquser2 ~mquser2/.ssh
getent hosts "$H" >/dev/null || echo "127.0.0.1 $H" >>/etc/hosts

# PBS: quick when it is up; absent or failing, the PBS tests skip, saying why.
"$(dirname "$0")"/pbs.sh start || echo "setup: no PBS; the sites suite's PBS tests will skip" >&2
exit 0
