#!/usr/bin/env bash
# Runs one training step in trainctl and in PyTorch and compares them (see
# check_against_torch.py). Usage: tests/torch/check_against_torch.sh [TRAINCTL_BINARY]
# Needs Debian's python3-torch (for /usr/bin/python3) and the `safetensors` package,
# installed here into a virtual environment that also sees Debian's packages.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:-$root/build/trainctl}
venv=${TRAINCTL_PYVENV:-$root/build/pyvenv}
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import torch, safetensors" 2>/dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "safetensors>=0.4"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/job.yaml" <<'YAML'
name: torch-check
seed: 42
model: {vocab_size: 96, seq_len: 32, n_layer: 2, n_head: 4, d_model: 64}
data: {type: synthetic}
training: {steps: 1, micro_batch_size: 4, global_batch_size: 4, grad_clip: 1.0}
optimizer: {lr: 1.0e-3, betas: [0.9, 0.95], weight_decay: 0.1, warmup_steps: 0}
YAML
"$bin" inspect step "$work/job.yaml" --out "$work/step"
# A short real run too: its exported model.safetensors must load the same way.
"$bin" train "$work/job.yaml" --set training.steps=3 --set "run_dir=$work/run" >/dev/null
"$venv/bin/python" "$here/check_against_torch.py" "$work/step" "$work/run/model.safetensors"

# A checkpoint written by 4 ranks (tp 2 x pp 2), exported to one nanoGPT file with
# `trainctl ckpt export`: PyTorch loads the export (through the PyPI safetensors package)
# and gets the loss, gradients and update trainctl computes from that checkpoint.
"$bin" train "$work/job.yaml" --set training.steps=3 --set parallel.tp=2 --set parallel.pp=2 \
  --set "run_dir=$work/run3d" >/dev/null
"$bin" ckpt export "$work/run3d" --out "$work/exported.safetensors" >/dev/null
"$bin" inspect step "$work/job.yaml" --from "$work/run3d" --out "$work/step3d"
"$venv/bin/python" "$here/check_against_torch.py" "$work/step3d" "" \
  "$work/exported.safetensors"
