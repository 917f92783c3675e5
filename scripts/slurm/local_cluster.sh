#!/usr/bin/env bash
# A private single-node Slurm cluster on 127.0.0.1, for tests and for trying the sbatch
# templates without a real cluster (Debian 12: slurm-wlm 22.05 + munge; run as root).
#
#   scripts/slurm/local_cluster.sh start    # install if missing, start munged, slurmctld, slurmd
#   scripts/slurm/local_cluster.sh status   # daemons and the node's state (exit 0 when all run)
#   scripts/slurm/local_cluster.sh stop     # cancel its jobs, stop its daemons
#
# Everything lives in one state directory (TRAINCTL_SLURM_DIR, default
# /tmp/trainctl-slurm): its own munge key and socket, slurm.conf, logs, spool. Nothing in
# /etc is changed and no system service is started; the Slurm commands reach this cluster
# only when told to: `SLURM_CONF=$TRAINCTL_SLURM_DIR/slurm.conf sbatch ...` (start prints it).
# Ports: TRAINCTL_SLURMCTLD_PORT (16817) and TRAINCTL_SLURMD_PORT (16818), bound to
# 127.0.0.1 only, so a real Slurm on the same machine keeps its own.
#
# start is idempotent: with the daemons already up it only prints the config path. A node
# name of "localhost" keeps it independent of whether this machine's hostname resolves.
#
# Exit codes: 0 ok; 1 the cluster did not come up (the daemon logs are printed);
# 77 Slurm cannot run here (not root, or not installed and apt-get cannot install it).
set -euo pipefail

readonly dir=${TRAINCTL_SLURM_DIR:-/tmp/trainctl-slurm}
readonly ctld_port=${TRAINCTL_SLURMCTLD_PORT:-16817}
readonly slurmd_port=${TRAINCTL_SLURMD_PORT:-16818}
readonly conf=$dir/slurm.conf
readonly node=localhost
readonly packages=(slurm-wlm slurmctld slurmd slurm-client munge)
readonly commands=(slurmctld slurmd sbatch scontrol sinfo squeue scancel munged mungekey)

say() { echo "[local_cluster] $*"; }
unavailable() {
  say "$*"
  exit 77
}

# The daemons' pid files; a daemon is up when its file names a live process.
pid_of() { [[ -s $dir/$1.pid ]] && cat "$dir/$1.pid"; }
alive() {
  local pid
  pid=$(pid_of "$1") && kill -0 "$pid" 2>/dev/null
}

missing_commands() {
  local c missing=()
  for c in "${commands[@]}"; do
    command -v "$c" >/dev/null 2>&1 || [[ -x /usr/sbin/$c ]] || missing+=("$c")
  done
  echo "${missing[*]}"
}

ensure_installed() {
  [[ -z $(missing_commands) ]] && return 0
  command -v apt-get >/dev/null 2>&1 ||
    unavailable "Slurm is not installed ($(missing_commands)) and there is no apt-get"
  say "installing ${packages[*]}"
  if ! { apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${packages[@]}" >/dev/null; }; then
    unavailable "apt-get could not install ${packages[*]}"
  fi
  [[ -z $(missing_commands) ]] || unavailable "still missing after install: $(missing_commands)"
}

start_munge() {
  alive munged && return 0
  mkdir -p "$dir/munge"
  chmod 0700 "$dir" "$dir/munge"
  [[ -s $dir/munge.key ]] || mungekey --create --keyfile="$dir/munge.key"
  chmod 0400 "$dir/munge.key"
  # --force: munged refuses a socket below /tmp (world-writable ancestors) otherwise.
  munged --force --key-file="$dir/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge.seed"
}

write_conf() {
  local cpus mem_mb
  cpus=$(nproc)
  # Slurm drains a node that reports less memory than configured: stay below MemTotal.
  mem_mb=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
  mkdir -p "$dir/state" "$dir/spool"
  cat >"$conf" <<EOF
# Written by scripts/slurm/local_cluster.sh: one node on 127.0.0.1, state in $dir.
ClusterName=trainctl-local
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
# Bind to 127.0.0.1 only.
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
AuthType=auth/munge
CredType=cred/munge
# cred_expire=10: a requeued job waits for its old credential to expire (default 120 s).
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
# No cgroups and no systemd needed.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=sched_interval=2,bf_interval=2
JobRequeue=1
MpiDefault=none
ReturnToService=2
KillWait=30
MinJobAge=600
NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$node CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
}

node_state() { SLURM_CONF=$conf sinfo -h -N -o %T 2>/dev/null | head -n1; }

print_logs() {
  local f
  for f in munged slurmctld slurmd; do
    [[ -f $dir/$f.log ]] && {
      echo "--- $dir/$f.log (last 15 lines)"
      tail -n 15 "$dir/$f.log"
    }
  done
}

cmd_start() {
  [[ $(id -u) -eq 0 ]] || unavailable "the Slurm daemons of this test cluster run as root; not root"
  ensure_installed
  if alive munged && alive slurmctld && alive slurmd; then
    say "already running"
  else
    cmd_stop >/dev/null 2>&1 || true
    mkdir -p "$dir"
    start_munge
    write_conf
    # -i: ignore saved state, so each start begins with an empty queue.
    slurmctld -f "$conf" -i
    slurmd -f "$conf" -N "$node"
  fi
  local state="" deadline=$((SECONDS + 60))
  while ((SECONDS < deadline)); do
    state=$(node_state)
    [[ $state == idle || $state == mixed || $state == allocated ]] && break
    sleep 1
  done
  if [[ $state != idle && $state != mixed && $state != allocated ]]; then
    say "the node did not become idle within 60 s (state: '${state:-no answer}')"
    print_logs
    exit 1
  fi
  say "up: node $node ($state), config $conf"
  echo "SLURM_CONF=$conf"
}

cmd_stop() {
  if alive slurmctld; then
    # Cancel this cluster's jobs first, so no job step outlives its daemons.
    SLURM_CONF=$conf scancel --full --quiet --partition=local 2>/dev/null || true
    local deadline=$((SECONDS + 15))
    while ((SECONDS < deadline)) && [[ -n $(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null) ]]; do
      sleep 1
    done
  fi
  local d pid
  for d in slurmd slurmctld munged; do
    pid=$(pid_of "$d") || continue
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    rm -f "$dir/$d.pid"
  done
  say "stopped (state and logs kept in $dir)"
}

cmd_status() {
  local d running=0
  for d in munged slurmctld slurmd; do
    if alive "$d"; then
      say "$d: running (pid $(pid_of "$d"))"
      running=$((running + 1))
    else
      say "$d: not running"
    fi
  done
  if ((running == 3)); then
    SLURM_CONF=$conf sinfo -N
    SLURM_CONF=$conf squeue
    echo "SLURM_CONF=$conf"
  fi
  ((running == 3))
}

case ${1:-} in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *)
    echo "usage: $0 start|stop|status   (state in \$TRAINCTL_SLURM_DIR, default /tmp/trainctl-slurm)" >&2
    exit 2
    ;;
esac
