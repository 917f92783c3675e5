#!/usr/bin/env bash
# `trainctl ckpt verify` and a checkpoint save, with CRC-32C on the SSE4.2 instruction (the
# default) and on the table path (TRAINCTL_CRC32C=software), side by side on the same
# checkpoint (~1.2 GB: GPT d_model 1024, 8 layers, with its AdamW state), page cache warm.
# One JSON line per case, median of 3.
#   scripts/bench/bench_ckpt_checksums.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
trainctl=${1:-$root/build}/trainctl
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/big.yaml" <<'YAML'
name: big
run_dir: runs/big
model: {type: gpt, vocab_size: 256, seq_len: 32, n_layer: 8, n_head: 16, d_model: 1024}
data: {type: synthetic}
training: {steps: 1, micro_batch_size: 1, global_batch_size: 1}
checkpoint: {every_steps: 1, async: false}
logging: {every_steps: 1}
YAML
median() { sort -g | sed -n 2p; }
for path in sse4.2 software; do
  if [[ $path == software ]]; then export TRAINCTL_CRC32C=software; else unset TRAINCTL_CRC32C; fi
  saves=() verifies=()
  for _ in 1 2 3; do
    rm -rf "$work/runs"
    "$trainctl" train "$work/big.yaml" --resume none >/dev/null 2>&1
    ckpt=$(ls -d "$work"/runs/big/checkpoints/step_* | head -1)
    # The save: the checkpoint span the worker logged (write + checksum + commit).
    saves+=("$(sed -n 's/.*checkpoint step 1 written in \([0-9.]*\) s.*/\1/p' \
      "$work"/runs/big/logs/rank0.log | head -1)")
    cat "$ckpt"/* >/dev/null
    start=$(date +%s.%N)
    "$trainctl" ckpt verify "$ckpt" >/dev/null
    verifies+=("$(echo "$(date +%s.%N) - $start" | bc)")
  done
  bytes=$(du -sb "$ckpt" | cut -f1)
  v=$(printf '%s\n' "${verifies[@]}" | median)
  s=$(printf '%s\n' "${saves[@]}" | median)
  printf '{"crc32c": "%s", "checkpoint_bytes": %s, "verify_s": %.3f, "verify_gb_per_s": %.2f, "save_s": %.2f}\n' \
    "$path" "$bytes" "$v" "$(echo "$bytes / $v / 1000000000" | bc -l)" "${s:-nan}"
done
