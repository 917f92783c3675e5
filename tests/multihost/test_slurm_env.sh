#!/usr/bin/env bash
# shellcheck disable=SC2034 # the MH_* arrays are read by launch_nodes (common.sh)
# The Slurm multi-node template (scripts/slurm/train_multinode.sbatch) across two hosts
# (ctest label: multihost): the batch script runs as Slurm would run it, with the batch
# environment of a 2-node job (SLURM_JOB_ID, SLURM_JOB_NODELIST=node[1-2], ...), and its
# srun starts one trainctl per host with srun's per-task variables (fake_srun.sh: a real
# multi-node Slurm needs a slurmd per host). Checks that the template's environment is
# enough: each launcher finds its node rank, node 0 (the first host of the node list,
# resolved by name) and the port from SLURM_*, the nodes meet with the template's
# TRAINCTL_TOKEN, the job passes the start-up checks, trains with the single worker's
# losses (2e-5 relative), and the script exits 0.
#
#   tests/multihost/test_slurm_env.sh path/to/trainctl        (as root)
set -euo pipefail
# shellcheck source=tests/multihost/common.sh
source "$(dirname "$0")/common.sh"
mh_init multihost_slurm_env "$@"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
readonly job_id=4242
readonly port=$((29500 + job_id % 1000)) # cluster_env.h: the port Slurm jobs use

write_spec "$work/ref.yaml" ref "{dp: 1, tp: 1, pp: 1}"
run_single ref "$work/ref.yaml"
write_spec "$work/slurm.yaml" slurm "{dp: 2, tp: 1, pp: 2}"

hosts_up slurm 2
hosts_export
{
  echo "127.0.0.1 localhost"
  echo "$(host_addr 1) $(host_name 1)"
  echo "$(host_addr 2) $(host_name 2)"
} >"$work/hosts"
mkdir -p "$work/bin"
ln -s "$here/fake_srun.sh" "$work/bin/srun"
printf '#!/bin/sh\necho "scontrol $*" >>"%s/scontrol.calls"\n' "$work" >"$work/bin/scontrol"
chmod +x "$work/bin/scontrol"

# The batch step's environment (sbatch --nodes=2 on node1, node2); nothing else from
# this test's environment that starts with SLURM_ or TRAINCTL_.
set +e
(
  cd "$work"
  for v in $(env | grep -oE '^(SLURM|TRAINCTL)_[A-Za-z0-9_]*' || true); do unset "$v"; done
  PATH="$work/bin:$PATH" MH_HOSTS_FILE="$work/hosts" JOB="$work/slurm.yaml" TRAINCTL="$trainctl" \
    SLURM_JOB_ID=$job_id SLURM_JOB_NAME=trainctl SLURM_JOB_NUM_NODES=2 SLURM_NNODES=2 \
    SLURM_JOB_NODELIST="node[1-2]" SLURM_NODELIST="node[1-2]" SLURM_CPUS_ON_NODE=2 \
    SLURM_SUBMIT_DIR="$work" \
    timeout -k 5 120 bash "$root/scripts/slurm/train_multinode.sbatch"
) >"$work/batch.log" 2>&1
rc=$?
set -e
((rc == 0)) || {
  tail -n 60 "$work/batch.log"
  fail "the batch script exited $rc"
}
grep -qF "trainctl exited with 0" "$work/batch.log" || fail "the batch script did not report trainctl's exit"
grep -qF "node 0 of 2 runs 2 worker(s)" "$work/batch.log" || fail "no launcher took node rank 0"
grep -qF "node 1 of 2 runs 2 worker(s)" "$work/batch.log" || fail "no launcher took node rank 1"
grep -qF "rendezvous store listening on port $port" "$work/batch.log" ||
  fail "node 0's store is not on port $port (29500 + job id % 1000)"
grep -qF "all 2 nodes joined" "$work/batch.log" || fail "the nodes did not meet"
grep -qF "all 2 nodes see run_dir $work/runs/slurm" "$work/batch.log" || fail "no start-up check"
same_losses "$work/runs/ref/metrics.jsonl" "$work/runs/slurm/metrics.jsonl" 2e-5
[[ ! -e $work/scontrol.calls ]] || fail "the script called scontrol after a clean finish: $(cat "$work/scontrol.calls")"
echo "PASS: $mh_name"
