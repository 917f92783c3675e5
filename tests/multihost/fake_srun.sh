#!/usr/bin/env bash
# A stand-in for Slurm's srun in a batch script, for tests/multihost/test_slurm_env.sh:
# runs the command once per host of the test (hosts.sh, reached through MH_HOSTS), with
# the per-task variables srun sets for one task per node (SLURM_NODEID, SLURM_PROCID,
# SLURM_LOCALID, SLURMD_NODENAME, SLURM_STEP_ID) on top of the batch script's environment,
# and /etc/hosts naming the hosts (MH_HOSTS_FILE). srun's own options (everything before
# the command) are ignored; like srun it exits with the highest exit code of its tasks.
set -uo pipefail
# shellcheck source=tests/multihost/hosts.sh
source "$(dirname "$(readlink -f "$0")")/hosts.sh"
hosts_attach
# shellcheck disable=SC2154 # set by hosts_attach
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
echo "fake srun: $* on ${_mh_n} hosts" >&2
pids=()
for ((i = 1; i <= _mh_n; ++i)); do
  SLURM_NODEID=$((i - 1)) SLURM_PROCID=$((i - 1)) SLURM_LOCALID=0 SLURM_STEP_ID=0 \
    SLURMD_NODENAME=$(host_name "$i") \
    on_host "$i" --hosts-file "$MH_HOSTS_FILE" -- "$@" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
  while kill -0 "$p" 2>/dev/null; do wait "$p"; done
  wait "$p"
  code=$?
  ((code > rc)) && rc=$code
done
exit "$rc"
