#!/usr/bin/env bash
# Starts (or stops) Slurm on this host as a one-node cluster (partition
# debug, 2 CPUs, no accounting, immediate scheduling). Idempotent: running
# daemons are left alone. Needs root and scripts/setup.sh.
#   scripts/slurm.sh start|stop|status
set -euo pipefail
H=$(hostname -s)
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
state() { sinfo -h -n "$H" -o %t 2>/dev/null || true; }

case "${1:-start}" in
status)
	alive /run/slurmctld.pid && alive /run/slurmd.pid && echo "slurm: running ($(state))" && exit 0
	echo "slurm: not running"; exit 1 ;;
stop)
	for pf in /run/slurmd.pid /run/slurmctld.pid; do
		alive "$pf" || { rm -f "$pf"; continue; }
		pid=$(cat "$pf"); kill "$pid"
		for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		rm -f "$pf"
	done
	exit 0 ;;
start) ;;
*) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac

[ "$(id -u)" = 0 ] || { echo "slurm: needs root" >&2; exit 1; }
[ -x /usr/sbin/slurmctld ] || { echo "slurm: not installed (run scripts/setup.sh as root)" >&2; exit 1; }
install -d -o munge -g munge -m 0755 /run/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
	su -s /bin/sh munge -c /usr/sbin/munged
	for i in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
fi
install -d -o slurm -g slurm /var/spool/slurmctld /var/log/slurm
install -d /var/spool/slurmd
conf=$(mktemp)
cat >"$conf" <<EOC
ClusterName=ci
SlurmctldHost=$H
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=300
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=$H CPUs=2 RealMemory=4096 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOC
if ! cmp -s "$conf" /etc/slurm/slurm.conf; then
	install -m 644 "$conf" /etc/slurm/slurm.conf
	changed=1
fi
rm -f "$conf"
alive /run/slurmctld.pid || { rm -f /run/slurmctld.pid; /usr/sbin/slurmctld; }
alive /run/slurmd.pid || { rm -f /run/slurmd.pid; /usr/sbin/slurmd; }
[ -n "${changed:-}" ] && scontrol reconfigure >/dev/null 2>&1 || true
for i in $(seq 100); do
	case "$(state)" in
	idle*|mix*|alloc*) echo "slurm: running ($(state))"; exit 0 ;;
	down*|drain*) scontrol update nodename="$H" state=resume >/dev/null 2>&1 || true ;;
	esac
	sleep 0.1
done
echo "slurm: node $H is $(state), not idle" >&2
exit 1
