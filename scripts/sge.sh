#!/usr/bin/env bash
# Starts (or stops) Son of Grid Engine on this host as a one-node cluster
# with one queue all.q of 2 slots and a 1 s scheduling interval. Idempotent:
# a running qmaster/execd is left alone. Needs root and scripts/setup.sh.
#   scripts/sge.sh start|stop|status
set -euo pipefail
export SGE_ROOT=/var/lib/gridengine SGE_CELL=default
C=$SGE_ROOT/$SGE_CELL/common
QPID=/var/spool/gridengine/qmaster/qmaster.pid
H=$(hostname)

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
execd_pidfile() { for f in /var/spool/gridengine/execd/*/execd.pid; do [ -f "$f" ] && echo "$f" && return; done; true; }

case "${1:-start}" in
status)
	alive "$QPID" && qstat -f -q all.q >/dev/null 2>&1 && echo "sge: running" && exit 0
	echo "sge: not running"; exit 1 ;;
stop)
	for pf in "$(execd_pidfile)" "$QPID"; do
		[ -n "$pf" ] && alive "$pf" || continue
		pid=$(cat "$pf"); kill "$pid"
		for i in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		rm -f "$pf"
	done
	exit 0 ;;
start) ;;
*) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac

[ "$(id -u)" = 0 ] || { echo "sge: needs root" >&2; exit 1; }
[ -x /usr/sbin/sge_qmaster ] || { echo "sge: not installed (run scripts/setup.sh as root)" >&2; exit 1; }
# Without host_aliases qmaster renames itself localhost and refuses clients.
echo "$H localhost" >$C/host_aliases
echo "$H" >$C/act_qmaster
chown sgeadmin:sgeadmin $C/host_aliases $C/act_qmaster
install -d -o sgeadmin -g sgeadmin /run/gridengine
if ! alive "$QPID"; then
	rm -f "$QPID"
	/usr/sbin/sge_qmaster
fi
for i in $(seq 100); do qstat >/dev/null 2>&1 && break; sleep 0.1; done
qconf -sh 2>/dev/null | grep -qx "$H" || qconf -ah "$H" >/dev/null 2>&1 || true
qconf -ss 2>/dev/null | grep -qx "$H" || qconf -as "$H" >/dev/null
pf=$(execd_pidfile)
if [ -z "$pf" ] || ! alive "$pf"; then
	[ -n "$pf" ] && rm -f "$pf"
	/usr/sbin/sge_execd
fi
for i in $(seq 100); do qconf -se "$H" >/dev/null 2>&1 && break; sleep 0.1; done
if ! qconf -sq all.q >/dev/null 2>&1; then
	{ EDITOR=cat qconf -aq all.q 2>/dev/null || true; } | sed -e "s/^hostlist .*/hostlist $H/" -e 's/^slots .*/slots 2/' \
		-e 's/^pe_list .*/pe_list NONE/' -e 's/^load_thresholds .*/load_thresholds NONE/' >/tmp/mq-all.q
	qconf -Aq /tmp/mq-all.q >/dev/null
	rm -f /tmp/mq-all.q
fi
# The parallel environment placeholders of several cores ask for (cls
# site add --cpus N; "smp" is mq's default --pe): all slots on one host.
if ! qconf -sp smp >/dev/null 2>&1; then
	printf '%s\n' 'pe_name smp' 'slots 999' 'user_lists NONE' 'xuser_lists NONE' 'start_proc_args NONE' \
		'stop_proc_args NONE' 'allocation_rule $pe_slots' 'control_slaves FALSE' 'job_is_first_task TRUE' \
		'urgency_slots min' 'accounting_summary FALSE' 'qsort_args NONE' >/tmp/mq-smp.pe
	qconf -Ap /tmp/mq-smp.pe >/dev/null
	rm -f /tmp/mq-smp.pe
fi
qconf -sq all.q | grep '^pe_list' | grep -qw smp || qconf -mattr queue pe_list smp all.q >/dev/null
if ! qconf -ssconf | grep -q '^schedule_interval .*0:0:1$'; then
	qconf -ssconf | sed -e 's/^schedule_interval .*/schedule_interval 0:0:1/' -e 's/^flush_submit_sec .*/flush_submit_sec 1/' \
		-e 's/^flush_finish_sec .*/flush_finish_sec 1/' >/tmp/mq-sched.conf
	qconf -Msconf /tmp/mq-sched.conf >/dev/null
	rm -f /tmp/mq-sched.conf
fi
# Logins get SGE's commands as a standard install's settings.sh gives
# them: straight from $SGE_ROOT/bin/$SGE_ARCH. Debian's /usr/bin/qstat is a
# wrapper that works out the architecture anew on every call (util/arch:
# some twenty processes, the C preprocessor among them); the CLS lists a
# site's queue every poll (300 ms in the sites suite), and through the
# wrapper that took a third of the CPU the suite's SGE tests used. PBS's
# users put its commands first in their own ~/.profile (scripts/pbs.sh).
profile='# Son of Grid Engine for logins (written by mq'"'"'s scripts/sge.sh).
. /var/lib/gridengine/default/common/settings.sh
case ":$PATH:" in *":$SGE_ROOT/bin/$SGE_ARCH:"*) ;; *) PATH=$SGE_ROOT/bin/$SGE_ARCH:$PATH; export PATH ;; esac'
if [ "$(cat /etc/profile.d/sge.sh 2>/dev/null)" != "$profile" ]; then
	printf '%s\n' "$profile" >/etc/profile.d/sge.sh.tmp
	mv /etc/profile.d/sge.sh.tmp /etc/profile.d/sge.sh
fi
for i in $(seq 100); do
	qstat -f -q all.q | awk -v q="all.q@$H" '$1==q && NF==5{ok=1} END{exit !ok}' && { echo "sge: running (all.q@$H)"; exit 0; }
	sleep 0.2
done
echo "sge: all.q@$H did not come up" >&2
qstat -f >&2 || true
exit 1
