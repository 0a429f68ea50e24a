#!/usr/bin/env bash
# Data staging throughput: the numbers in BENCHMARKS.md, "Data
# staging". Starts its own sshd on loopback (port STAGE_PORT,
# account STAGE_USER, key-only, internal-sftp), then, in the same run:
#
#   1. one STAGE_BIG_MB MiB file from the CLS host to the account's home:
#      package stage (mqbench stage: one SSH connection, site.SSH.SFTP, a
#      stage.Mover, SHA-256 computed on the way) against OpenSSH
#      `sftp -b` putting the same file;
#   2. STAGE_FILES files of 10 KiB: stage (MoveAll, STAGE_PARALLEL at a
#      time on the one connection) against `scp`, one call per file, timed
#      on the first STAGE_SCP_FILES files (at ~0.2 s a call, all 10,000
#      would take half an hour; the per-file rate is what is compared).
#   3. and 4. (STAGE_BETWEEN=1, the default) the same between two sites:
#      the files staged first to one data root (not timed), then timed from
#      there to a second (mqbench stage -between: a second SSH connection,
#      through this process, as the CLS moves a file made at one site to
#      another), against OpenSSH's `scp -3` (remote to remote through the
#      local host; OpenSSH 9 scp speaks SFTP) of the same big file and of
#      the same small files one call per file.
#
# Prints key=value lines and the ratios (issue targets: >= 0.8x sftp for
# the big file, >= 3x scp-per-file for the small ones).
#
# Usage (root; it starts sshd, so take the sites lock):
#   flock /tmp/mq-sites.lock scripts/bench/staging.sh
# Knobs: STAGE_PORT (2298), STAGE_USER (mquser), STAGE_BIG_MB (1024),
# STAGE_FILES (10000), STAGE_SCP_FILES (300), STAGE_PARALLEL (32),
# STAGE_BETWEEN (1; 0 skips the site-to-site runs).
# Not for CI: it wants a quiet machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PORT=${STAGE_PORT:-2298}
U=${STAGE_USER:-mquser}
BIG_MB=${STAGE_BIG_MB:-1024}
FILES=${STAGE_FILES:-10000}
SCP_FILES=${STAGE_SCP_FILES:-300}
PAR=${STAGE_PARALLEL:-32}
BETWEEN=${STAGE_BETWEEN:-1}

if [ "$(id -u)" != 0 ] || [ ! -x /usr/sbin/sshd ]; then
	echo "staging.sh: needs root and an OpenSSH server (scripts/setup.sh installs it)" >&2
	exit 1
fi
id "$U" >/dev/null 2>&1 || { useradd -m -s /bin/bash "$U"; usermod -p '*' "$U"; }
HOMEDIR=$(getent passwd "$U" | cut -d: -f6)

W=$(mktemp -d /tmp/mqstage.XXXXXX)
SSHD_PID=
cleanup() {
	[ -n "$SSHD_PID" ] && kill "$SSHD_PID" 2>/dev/null || true
	rm -rf "$W" "$HOMEDIR/.mq-stage-bench"
}
trap cleanup EXIT

# sshd: own host key, own authorized_keys, loopback only.
ssh-keygen -q -t ed25519 -N '' -f "$W/host_ed25519"
ssh-keygen -q -t ed25519 -N '' -f "$W/client_key"
cp "$W/client_key.pub" "$W/authorized_keys"
chmod 755 "$W"
chmod 644 "$W/authorized_keys"
install -d -m 755 /run/sshd
cat >"$W/sshd_config" <<EOC
Port $PORT
ListenAddress 127.0.0.1
HostKey $W/host_ed25519
PidFile $W/sshd.pid
AuthorizedKeysFile $W/authorized_keys
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
MaxStartups 100:30:200
MaxSessions 100
Subsystem sftp internal-sftp
EOC
/usr/sbin/sshd -t -f "$W/sshd_config"
/usr/sbin/sshd -f "$W/sshd_config" -E "$W/sshd.log"
for _ in $(seq 100); do [ -s "$W/sshd.pid" ] && break; sleep 0.1; done
SSHD_PID=$(cat "$W/sshd.pid")
echo "[127.0.0.1]:$PORT $(cut -d' ' -f1,2 "$W/host_ed25519.pub")" >"$W/known_hosts"
OPT=(-i "$W/client_key" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes -o "UserKnownHostsFile=$W/known_hosts")
for _ in $(seq 100); do
	ssh -p "$PORT" "${OPT[@]}" "$U@127.0.0.1" true 2>/dev/null && break
	sleep 0.1
done
ssh -p "$PORT" "${OPT[@]}" "$U@127.0.0.1" 'mkdir -p .mq-stage-bench/sftp .mq-stage-bench/scp'

(cd "$ROOT" && PATH=/usr/local/go/bin:$PATH go build -o "$W/mqbench" ./scripts/bench/mqbench)
MQB=("$W/mqbench" stage -addr "127.0.0.1:$PORT" -user "$U" -key "$W/client_key" -known-hosts "$W/known_hosts" -src "$W/src" -parallel "$PAR")

now() { date +%s.%N; }
kv() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p"; }

echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg) cores=$(nproc) $(ssh -V 2>&1 | cut -d, -f1)"
t0=$(now); ssh -p "$PORT" "${OPT[@]}" "$U@127.0.0.1" true; t1=$(now)
echo "ssh_login_seconds=$(echo "$t1 - $t0" | bc -l | xargs printf %.3f)"

# 1. the big file
mkdir -p "$W/src/data"
head -c "${BIG_MB}M" /dev/urandom >"$W/src/data/big.bin"
out=$("${MQB[@]}" -big /data/big.bin)
echo "stage: $out"
stage_big=$(echo "$out" | kv big_seconds)
want=$(sha256sum <"$W/src/data/big.bin" | cut -d' ' -f1)
got=$(ssh -p "$PORT" "${OPT[@]}" "$U@127.0.0.1" 'sha256sum <.mq-stage-bench/stage/data/big.bin' | cut -d' ' -f1)
[ "$got" = "$want" ] || { echo "staging.sh: the staged copy differs: $got, want $want" >&2; exit 1; }
ssh -p "$PORT" "${OPT[@]}" "$U@127.0.0.1" 'rm -rf .mq-stage-bench/stage'
t0=$(now)
echo "put $W/src/data/big.bin .mq-stage-bench/sftp/big.bin" | sftp -q -b - -P "$PORT" "${OPT[@]}" "$U@127.0.0.1" >/dev/null
t1=$(now)
sftp_big=$(echo "$t1 - $t0" | bc -l)
echo "sftp: big_seconds=$(printf %.3f "$sftp_big") big_MBps=$(echo "$BIG_MB * 1048576 / $sftp_big / 1000000" | bc -l | xargs printf %.1f) (includes its login)"
ssh -p "$PORT" "${OPT[@]}" "$U@127.0.0.1" 'rm -rf .mq-stage-bench/sftp'

# 2. the small files
out=$("${MQB[@]}" -small /data/small -files "$FILES" -size 10240 -gen)
echo "stage: $out"
stage_rate=$(echo "$out" | kv small_files_per_s)
mapfile -t sample < <(find "$W/src/data/small" -type f | sort | head -n "$SCP_FILES")
t0=$(now)
for f in "${sample[@]}"; do
	scp -q -P "$PORT" "${OPT[@]}" "$f" "$U@127.0.0.1:.mq-stage-bench/scp/$(basename "$f")"
done
t1=$(now)
scp_rate=$(echo "${#sample[@]} / ($t1 - $t0)" | bc -l)
echo "scp: files=${#sample[@]} seconds=$(echo "$t1 - $t0" | bc -l | xargs printf %.3f) files_per_s=$(printf %.1f "$scp_rate")"

echo "ratio_big_vs_sftp=$(echo "$sftp_big / $stage_big" | bc -l | xargs printf %.2f) (target >= 0.8)"
echo "ratio_small_vs_scp=$(echo "$stage_rate / $scp_rate" | bc -l | xargs printf %.1f) (target >= 3)"

if [ "$BETWEEN" = 1 ]; then
	# 3. the big file, site to site
	out=$("${MQB[@]}" -big /data/big.bin -between .mq-stage-bench/stage2)
	echo "stage between sites: $out"
	between_big=$(echo "$out" | kv big_seconds)
	got=$(ssh -p "$PORT" "${OPT[@]}" "$U@127.0.0.1" 'sha256sum <.mq-stage-bench/stage2/data/big.bin' | cut -d' ' -f1)
	[ "$got" = "$want" ] || { echo "staging.sh: the copy staged between sites differs: $got, want $want" >&2; exit 1; }
	ssh -p "$PORT" "${OPT[@]}" "$U@127.0.0.1" 'rm -rf .mq-stage-bench/stage2/data/big.bin && mkdir -p .mq-stage-bench/scp3a .mq-stage-bench/scp3b'
	echo "put $W/src/data/big.bin .mq-stage-bench/scp3a/big.bin" | sftp -q -b - -P "$PORT" "${OPT[@]}" "$U@127.0.0.1" >/dev/null
	t0=$(now)
	scp -3 -q -P "$PORT" "${OPT[@]}" "$U@127.0.0.1:.mq-stage-bench/scp3a/big.bin" "$U@127.0.0.1:.mq-stage-bench/scp3b/big.bin"
	t1=$(now)
	scp3_big=$(echo "$t1 - $t0" | bc -l)
	echo "scp -3: big_seconds=$(printf %.3f "$scp3_big") big_MBps=$(echo "$BIG_MB * 1048576 / $scp3_big / 1000000" | bc -l | xargs printf %.1f) (includes its two logins)"
	ssh -p "$PORT" "${OPT[@]}" "$U@127.0.0.1" 'rm -rf .mq-stage-bench/scp3a .mq-stage-bench/scp3b && mkdir -p .mq-stage-bench/scp3b'

	# 4. the small files, site to site (the sample scp'd in 2. is at the first site)
	out=$("${MQB[@]}" -small /data/small -files "$FILES" -size 10240 -between .mq-stage-bench/stage2)
	echo "stage between sites: $out"
	between_rate=$(echo "$out" | kv small_files_per_s)
	t0=$(now)
	for f in "${sample[@]}"; do
		b=$(basename "$f")
		scp -3 -q -P "$PORT" "${OPT[@]}" "$U@127.0.0.1:.mq-stage-bench/scp/$b" "$U@127.0.0.1:.mq-stage-bench/scp3b/$b"
	done
	t1=$(now)
	scp3_rate=$(echo "${#sample[@]} / ($t1 - $t0)" | bc -l)
	echo "scp -3: files=${#sample[@]} seconds=$(echo "$t1 - $t0" | bc -l | xargs printf %.3f) files_per_s=$(printf %.1f "$scp3_rate")"
	echo "ratio_between_big_vs_scp3=$(echo "$scp3_big / $between_big" | bc -l | xargs printf %.2f) (target >= 0.8)"
	echo "ratio_between_small_vs_scp3=$(echo "$between_rate / $scp3_rate" | bc -l | xargs printf %.1f) (target >= 3)"
fi
rm -f "$W/src/data/big.bin"
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)"
