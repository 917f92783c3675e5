#!/usr/bin/env bash
# Preempt a real Slurm job and check that the requeued job resumes where it stopped.
#
#   tests/slurm/test_preempt_requeue.sh path/to/trainctl      (as root; ctest label: slurm)
#
# 1. starts a private one-node Slurm cluster on 127.0.0.1 (scripts/slurm/local_cluster.sh,
#    which installs slurm-wlm and munge with apt-get when they are missing);
# 2. trains a small job (synthetic data, checkpoint every 5 steps) directly: the reference;
# 3. submits the same job with scripts/slurm/train.sbatch, waits for some steps, sends
#    `scancel --signal=USR1 --batch`, and waits for the requeued job to finish;
# 4. checks: the first run exited 4 (preempted), the job was requeued once, the requeued run
#    continued from a checkpoint (not from step 1) up to training.steps, and every step's
#    loss (the last one logged for it) equals the reference run's (1e-6 relative).
# Exit codes: 0 pass, 1 fail, 77 skipped (not root, or Slurm cannot be installed).
# TRAINCTL_TEST_KEEP=1 keeps the work directory (logs, metrics, Slurm logs).
set -euo pipefail

readonly steps=120
readonly checkpoint_every=5
readonly preempt_after=20     # steps logged before the preemption signal
readonly wait_progress_s=90   # for the job to start and log preempt_after steps
readonly wait_requeue_s=150   # for the requeued job to finish
readonly rel_tol=1e-6

name=slurm_preempt_requeue
fail() {
  echo "FAIL: $name: $*"
  exit 1
}
skip() {
  echo "SKIP: $name: $*"
  exit 77
}

[[ $# -eq 1 ]] || {
  echo "usage: $0 path/to/trainctl" >&2
  exit 2
}
trainctl=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
[[ -x $trainctl ]] || fail "no trainctl binary at $1"
[[ $(id -u) -eq 0 ]] || skip "needs root to run the Slurm daemons"
command -v python3 >/dev/null || fail "python3 is needed to compare metrics.jsonl files"

work=$(mktemp -d /tmp/trainctl-slurm-test.XXXXXX)
# A cluster of its own: own state directory and ports, so a developer's cluster is untouched.
export TRAINCTL_SLURM_DIR=$work/slurm
export TRAINCTL_SLURMCTLD_PORT=16837 TRAINCTL_SLURMD_PORT=16838
cluster=$root/scripts/slurm/local_cluster.sh
finish() {
  local rc=$?
  "$cluster" stop >/dev/null 2>&1 || true
  if [[ ${TRAINCTL_TEST_KEEP:-0} == 1 || $rc -eq 1 ]]; then
    echo "$name: work directory kept: $work"
  else
    rm -rf "$work"
  fi
}
trap finish EXIT

t0=$SECONDS
set +e
cluster_out=$("$cluster" start 2>&1)
cluster_rc=$?
set -e
echo "$cluster_out"
((cluster_rc == 77)) && skip "Slurm is not available here: $(tail -n1 <<<"$cluster_out")"
((cluster_rc == 0)) || fail "the local Slurm cluster did not start (see above)"
export SLURM_CONF=$TRAINCTL_SLURM_DIR/slurm.conf
echo "$name: cluster up after $((SECONDS - t0)) s"

write_spec() { # $1: file, $2: run_dir
  cat >"$1" <<EOF
name: preempt_requeue
run_dir: $2
seed: 7
device: cpu
model: {type: gpt, vocab_size: 256, seq_len: 64, n_layer: 2, n_head: 4, d_model: 256}
data: {type: synthetic}
parallel: {dp: 1, tp: 1, pp: 1}
training: {steps: $steps, micro_batch_size: 8, global_batch_size: 8, eval_every: 0, threads: 1}
optimizer: {type: adamw, lr: 3.0e-3, warmup_steps: 5}
checkpoint: {every_steps: $checkpoint_every}
logging: {every_steps: 1}
EOF
}
write_spec "$work/reference.yaml" "$work/runs/reference"
write_spec "$work/slurm.yaml" "$work/runs/slurm"

if ! validate_out=$("$trainctl" validate "$work/slurm.yaml" 2>&1); then
  echo "$validate_out"
  fail "this trainctl refuses checkpoint.every_steps: $checkpoint_every (above); preemption" \
    "with resume needs checkpoints"
fi

t_ref=$SECONDS
set +e
"$trainctl" train "$work/reference.yaml" >"$work/reference.log" 2>&1
ref_rc=$?
set -e
if ((ref_rc != 0)); then
  tail -n 20 "$work/reference.log"
  grep -q 'checkpoint.every_steps' "$work/reference.log" &&
    fail "this trainctl refuses checkpoint.every_steps: $checkpoint_every (above); preemption" \
      "with resume needs checkpoints"
  fail "the reference run failed (exit $ref_rc); its log is above"
fi
ref_s=$((SECONDS - t_ref))
echo "$name: reference run: $steps steps in $ref_s s"

metrics=$work/runs/slurm/metrics.jsonl
job_out=$work/job.out
job_id=$(sbatch --parsable --chdir="$work" --output="$job_out" \
  --export="ALL,JOB=$work/slurm.yaml,TRAINCTL=$trainctl" "$root/scripts/slurm/train.sbatch")
job_id=${job_id%%;*}
t_submit=$SECONDS
echo "$name: submitted job $job_id"

job_field() { # $1: field of `scontrol show job`, e.g. JobState
  scontrol show job "$job_id" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n1
}
last_step() { [[ -s $metrics ]] && tail -n1 "$metrics" | sed -n 's/.*"step": *\([0-9]*\).*/\1/p'; }

deadline=$((SECONDS + wait_progress_s))
while :; do
  step=$(last_step || true)
  [[ -n $step && $step -ge $preempt_after ]] && break
  state=$(job_field JobState)
  [[ $state == PENDING || $state == RUNNING || $state == CONFIGURING ]] ||
    fail "job $job_id is $state before step $preempt_after; its log: $(tail -n 20 "$job_out" 2>/dev/null)"
  ((SECONDS < deadline)) ||
    fail "job $job_id ($state) did not reach step $preempt_after within $wait_progress_s s"
  sleep 0.2
done
scancel --signal=USR1 --batch "$job_id"
t_preempt=$SECONDS
echo "$name: sent SIGUSR1 to job $job_id at step $step, $((t_preempt - t_submit)) s after submitting"

# The first run's metrics lines end when train.sbatch logs trainctl's exit; the requeued
# run starts seconds later (the job waits for its old credential to expire), so counting
# the lines then splits the file into the two runs.
first_run_lines=""
deadline=$((SECONDS + wait_requeue_s))
while :; do
  if [[ -z $first_run_lines ]] && grep -q 'trainctl stopped at a step boundary\|trainctl exited with' "$job_out"; then
    first_run_lines=$(wc -l <"$metrics")
  fi
  state=$(job_field JobState)
  case $state in
    COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | PREEMPTED | BOOT_FAIL | DEADLINE) break ;;
  esac
  ((SECONDS < deadline)) || fail "job $job_id still $state $wait_requeue_s s after the signal"
  sleep 1
done
restarts=$(job_field Restarts)
exit_code=$(job_field ExitCode)
total_s=$((SECONDS - t_submit))
echo "$name: job $job_id ended $state (exit code $exit_code, restarts $restarts)" \
  "$((SECONDS - t_preempt)) s after the signal"
echo "--- job log ($job_out), without per-step lines"
grep -v '^step \|^checkpoint: step [0-9]* saved' "$job_out" || true
echo "---"

[[ $state == COMPLETED ]] || fail "job $job_id ended $state, not COMPLETED"
grep -q '(exit 4, preempted by SIGUSR1)' "$job_out" ||
  fail "the first run did not end with exit 4 (preempted) after SIGUSR1 (job log above)"
[[ $restarts == 1 ]] || fail "job $job_id was restarted $restarts times, expected 1"
grep -q 'restart count 1:' "$job_out" ||
  fail "the requeued run did not see SLURM_RESTART_COUNT=1 (job log above)"
[[ -n $first_run_lines ]] || fail "never saw the first run end in the job log"

# Metrics: the first run's lines, then the resumed run's, appended (a step can repeat).
python3 - "$work/runs/reference/metrics.jsonl" "$metrics" "$first_run_lines" "$steps" \
  "$checkpoint_every" "$rel_tol" <<'EOF'
import json, sys

ref_path, run_path = sys.argv[1], sys.argv[2]
first_run_lines, steps, every, tol = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])

def read(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]

def fail(msg):
    print("FAIL: slurm_preempt_requeue: " + msg)
    sys.exit(1)

ref = {m["step"]: m["loss"] for m in read(ref_path)}
run = read(run_path)
segments = [run[:first_run_lines], run[first_run_lines:]]  # preempted run, requeued run
if not segments[0] or not segments[1]:
    fail(f"metrics.jsonl has {len(segments[0])} line(s) from the preempted run and "
         f"{len(segments[1])} from the requeued one; expected both")
stopped_at = segments[0][-1]["step"]
resumed_from = segments[1][0]["step"] - 1
print(f"slurm_preempt_requeue: first run stopped after step {stopped_at}; "
      f"the requeued run started after step {resumed_from}")
if resumed_from == 0:
    fail("the requeued run started again from step 1: it did not resume from a checkpoint "
         f"(expected the one saved at step {stopped_at} on the stop signal, or at least step "
         f"{stopped_at // every * every} from checkpoint.every_steps)")
if not (stopped_at // every * every <= resumed_from <= stopped_at):
    fail(f"the requeued run resumed after step {resumed_from}, expected a checkpoint between "
         f"step {stopped_at // every * every} and {stopped_at}")
if segments[1][-1]["step"] != steps:
    fail(f"the requeued run ended at step {segments[1][-1]['step']}, not training.steps = {steps}")

last = {m["step"]: m["loss"] for m in run}  # the last occurrence of each step wins
worst = 0.0
for step in range(1, steps + 1):
    if step not in ref or step not in last:
        fail(f"step {step} is missing from the {'reference' if step not in ref else 'Slurm'} metrics")
    diff = abs(last[step] - ref[step]) / max(abs(ref[step]), 1e-30)
    worst = max(worst, diff)
    if diff > tol:
        fail(f"step {step}: loss {last[step]!r} after preemption vs {ref[step]!r} uninterrupted "
             f"(relative difference {diff:.2e} > {tol:g})")
print(f"slurm_preempt_requeue: all {steps} steps' losses match the uninterrupted run "
      f"(largest relative difference {worst:.1e}; {steps - resumed_from} steps after the resume)")
EOF

echo "PASS: $name: preempted at step $step, requeued, resumed and finished; job took $total_s s" \
  "(reference run $ref_s s, test $((SECONDS - t0)) s)"
