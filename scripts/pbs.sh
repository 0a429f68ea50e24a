#!/usr/bin/env bash
# Starts (or stops) a real OpenPBS 23.06 server for the sites suite, from the
# build vendored beside the repository (../shared/vendor/openpbs from the
# repo root: pbs-up.sh there installs and starts server, scheduler, comm and
# mom inside the network namespace pbsns, host pbshost = 10.211.0.1, this
# host 10.211.0.2), and the user mqpbs that PBS placeholders are submitted
# as: its ~/.profile puts /opt/pbs/bin first, before SGE's qsub. Idempotent
# (a running PBS is left alone, in about a second). Needs root.
#   scripts/pbs.sh start|stop|status
# Exits 3 saying why when the vendored PBS is absent: the PBS tests skip.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENDOR=$ROOT/../shared/vendor/openpbs
U=mqpbs

if ! [ -x "$VENDOR/pbs-up.sh" ]; then
	echo "pbs: no vendored OpenPBS at $(cd "$ROOT/.." && pwd)/shared/vendor/openpbs (pbs-up.sh); PBS tests skip" >&2
	exit 3
fi
case "${1:-start}" in
start) ;;
stop | status) exec "$VENDOR/pbs-up.sh" "$1" ;;
*) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "pbs: needs root" >&2; exit 1; }

# The Debian packages PBS needs (pbs-up.sh installs them) must be findable.
if ! [ -x /opt/pbs/sbin/pbs_server ] && ! [ -f /var/lib/apt/lists/.mq-updated ]; then
	apt-get update -qq >/dev/null 2>&1 && touch /var/lib/apt/lists/.mq-updated || true
fi
"$VENDOR/pbs-up.sh" start

if ! id "$U" >/dev/null 2>&1; then
	useradd -m -s /bin/bash "$U"
fi
usermod -p '*' "$U" # useradd leaves the account locked ('!'); sshd refuses locked accounts
install -d -m 700 -o "$U" -g "$U" "/home/$U/.ssh"
grep -q '^export PATH=/opt/pbs/bin:' "/home/$U/.profile" 2>/dev/null ||
	echo 'export PATH=/opt/pbs/bin:$PATH # PBS before SGE'"'"'s /usr/bin/qsub' >>"/home/$U/.profile"
chown "$U:$U" "/home/$U/.profile"
