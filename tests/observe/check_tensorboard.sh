#!/usr/bin/env bash
# TensorBoard event files read back by TensorBoard itself (check_tensorboard.py): a 2-worker
# run, then a resume from its step-3 checkpoint with more steps (steps 4-6 are logged twice
# in metrics.jsonl, with other learning rates: TensorBoard must show the resumed values once).
# Usage: tests/observe/check_tensorboard.sh TRAINCTL_BINARY
# PyPI's `tensorboard` goes into a virtual environment kept at $TRAINCTL_TBVENV (the build
# directory's tbvenv/), made once; exit 77 (skipped) only when PyPI cannot be reached.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:?usage: check_tensorboard.sh TRAINCTL_BINARY}
venv=${TRAINCTL_TBVENV:-$(dirname "$bin")/tbvenv}
if ! "$venv/bin/python" -c "import tensorboard" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check tensorboard; then
    if ! python3 -c "import urllib.request; urllib.request.urlopen('https://pypi.org/simple/tensorboard/', timeout=10)" 2>/dev/null; then
      echo "skipped: PyPI is unreachable, cannot install tensorboard"
      rm -rf "$venv"
      exit 77
    fi
    echo "FAILED: pip install tensorboard failed although PyPI is reachable"
    exit 1
  fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/job.yaml" <<'YAML'
name: tb-check
model: {vocab_size: 64, seq_len: 16, n_layer: 2, n_head: 2, d_model: 32}
data: {type: synthetic}
parallel: {dp: 2}
training: {steps: 6, micro_batch_size: 2, global_batch_size: 4, eval_every: 3, eval_batches: 1}
checkpoint: {every_steps: 3, async: false}
logging: {every_steps: 1}
runtime: {comm_selftest: false}
YAML
"$bin" train "$work/job.yaml" >/dev/null
"$venv/bin/python" "$here/check_tensorboard.py" "$work/runs/tb-check"
"$bin" train "$work/job.yaml" --set training.steps=8 \
  --resume "$work/runs/tb-check/checkpoints/step_00000003" >/dev/null
n=$(ls "$work/runs/tb-check/tb" | grep -c '^events\.out\.tfevents\.')
[[ $n == 2 ]] || { echo "FAILED: expected one event file per launch, found $n"; exit 1; }
"$venv/bin/python" "$here/check_tensorboard.py" "$work/runs/tb-check" 2>/dev/null
# Per-step counters are means over the steps since the previous line: local SGD meets every
# 4 steps, a line every 10 steps shows its window's meetings spread over its steps, and
# TensorBoard has the same numbers as metrics.jsonl.
"$bin" train "$work/job.yaml" --set "run_dir=$work/local" --set training.steps=20 \
  --set parallel.dp_sync=local_sgd --set parallel.sync_every=4 --set logging.every_steps=10 \
  --set training.eval_every=20 --set checkpoint.every_steps=0 >/dev/null
"$venv/bin/python" "$here/check_tensorboard.py" "$work/local" --window-means
# runtime.fault_tolerance: replica 0 (the primary, which writes metrics.jsonl and tb/) is
# killed mid-run; replica 1 takes over both, and TensorBoard still has every step once,
# `replicas` included (the steps replica 1 trained alone while replica 0 restarted show 1;
# a restart quick enough to join the very next epoch leaves none).
"$bin" train "$work/job.yaml" --set "run_dir=$work/ft" --set training.steps=3000 \
  --set parallel.pp=2 --set training.eval_every=0 --set checkpoint.every_steps=0 \
  --set runtime.fault_tolerance.enabled=true >/dev/null &
ft_pid=$!
last_ft_step() {
  [[ $(tail -n1 "$work/ft/metrics.jsonl" 2>/dev/null) =~ \"step\":([0-9]+) ]] &&
    echo "${BASH_REMATCH[1]}" || echo 0
}
for _ in $(seq 1 600); do (($(last_ft_step) >= 40)) && break; sleep 0.05; done
kill -KILL "$(grep -o 'worker started: pid [0-9]*' "$work/ft/logs/rank0.log" | tail -n1 | grep -o '[0-9]*$')"
(($(last_ft_step) < 3000)) || { echo "FAILED: the fault-tolerant run ended before its primary was killed"; exit 1; }
wait "$ft_pid" || { echo "FAILED: the fault-tolerant run failed"; exit 1; }
grep -q '"generations":\[1,' "$work/ft/membership.jsonl" ||
  { echo "FAILED: replica 0 never came back (restart 1) in $work/ft/membership.jsonl"; exit 1; }
"$venv/bin/python" "$here/check_tensorboard.py" "$work/ft" --replicas-change
# logging.tensorboard: false writes no tb/.
"$bin" train "$work/job.yaml" --set logging.tensorboard=false --set "run_dir=$work/off" >/dev/null
[[ ! -e $work/off/tb ]] || { echo "FAILED: logging.tensorboard: false wrote $work/off/tb"; exit 1; }
echo "ok: TensorBoard reads every scalar, once per step after a resume, window means as logged"
