#!/usr/bin/env bash
# `trainctl ckpt export --format hf` loaded by Hugging Face transformers (PyPI 4.36.2 over
# Debian's python3-torch): a small BPE vocabulary trained with `tokenizers`, data prepared
# with `trainctl data prepare`, a tiny GPT trained 3 steps on tp 2 and exported at the end
# (checkpoint.export_hf) and by `ckpt export --format hf` (the same bytes); then
# check_hf_export.py compares transformers' loss, gradients and logits with trainctl's on one
# batch, and the exported tokenizer (trained as bpe-400.json: exported as tokenizer.json)
# loaded with AutoTokenizer with trainctl's encoding. Then the same for a small
# Llama (check_hf_export_llama.py: LlamaForCausalLM against trainctl and a plain Llama), and
# a small Mixtral (check_hf_export_mixtral.py: MixtralForCausalLM, llama + moe).
# Usage: check_hf_export.sh TRAINCTL_BINARY. Exit 77 (skipped) when PyPI cannot be reached.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:-$root/build/trainctl}
source "$here/hf_venv.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
text=$work/corpus.txt
for i in 1 2 3 4 5 6; do cat "$root/tests/data/tokenizer/unicode_sample.txt" "$root/README.md"; done > "$text"
"$venv/bin/python" - "$text" "$work/bpe-400.json" <<'PY'
import sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train([sys.argv[1]], trainers.BpeTrainer(
    vocab_size=400, special_tokens=["<|endoftext|>"], show_progress=False,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
tok.save(sys.argv[2])
PY
"$bin" data prepare --tokenizer "$work/bpe-400.json" --input "$text" --out "$work/data" \
  --val-fraction 0.1 >/dev/null 2>&1
cat > "$work/job.yaml" <<'YAML'
name: hf-export
seed: 7
model: {vocab_size: 400, seq_len: 32, n_layer: 2, n_head: 4, d_model: 64}
data: {type: tokens, path: data, val_fraction: 0}
parallel: {tp: 2}
training: {steps: 3, micro_batch_size: 4, global_batch_size: 4}
checkpoint: {export_hf: true}
optimizer: {lr: 1.0e-2, warmup_steps: 0}
YAML
"$bin" train "$work/job.yaml" >/dev/null  # checkpoint.export_hf: writes runs/hf-export/hf
"$bin" ckpt export "$work/runs/hf-export/checkpoints" --format hf --out "$work/hf2"
cmp "$work/runs/hf-export/hf/model.safetensors" "$work/hf2/model.safetensors"
"$bin" inspect step "$work/job.yaml" --set parallel.tp=1 --from "$work/runs/hf-export" \
  --out "$work/step" >/dev/null
head -c 3000 "$text" > "$work/sample.txt"
"$bin" data encode --tokenizer "$work/bpe-400.json" --input "$work/sample.txt" \
  --out "$work/sample.ids" 2>/dev/null
"$venv/bin/python" "$here/check_hf_export.py" "$work/runs/hf-export/hf" "$work/step" \
  "$work/sample.txt" "$work/sample.ids"

# A tokenizer file of another name goes out as tokenizer.json, which AutoTokenizer loads as
# the fast tokenizer; an earlier export's files in --out need --force.
test -f "$work/runs/hf-export/hf/tokenizer.json" && test ! -e "$work/runs/hf-export/hf/bpe-400.json"
if "$bin" ckpt export "$work/runs/hf-export/checkpoints" --format hf --out "$work/hf2" 2>/dev/null; then
  echo "FAIL: a non-empty --out was written without --force"; exit 1
fi
"$bin" ckpt export "$work/runs/hf-export/checkpoints" --format hf --out "$work/hf2" --force >/dev/null
cmp "$work/runs/hf-export/hf/model.safetensors" "$work/hf2/model.safetensors"

# Llama (LlamaForCausalLM): grouped-query attention (4 heads, 2 k/v heads), SwiGLU, RoPE with
# Llama 3's theta, an untied head; trained on tp 2 x pp 2 and exported from the checkpoint.
cat > "$work/llama.yaml" <<'YAML'
name: hf-llama
seed: 7
model: {type: llama, vocab_size: 400, seq_len: 32, n_layer: 2, n_head: 4, n_kv_head: 2,
        d_model: 64, ffn_hidden: 96, rope_theta: 500000}
data: {type: tokens, path: data, val_fraction: 0}
parallel: {tp: 2, pp: 2}
training: {steps: 3, micro_batch_size: 4, global_batch_size: 4}
optimizer: {lr: 1.0e-2, warmup_steps: 0}
YAML
"$bin" train "$work/llama.yaml" >/dev/null
"$bin" ckpt export "$work/runs/hf-llama/checkpoints" --format hf --out "$work/hf-llama"
"$bin" inspect step "$work/llama.yaml" --set parallel.tp=1 --set parallel.pp=1 \
  --from "$work/runs/hf-llama" --out "$work/step-llama" >/dev/null
"$venv/bin/python" "$here/check_hf_export_llama.py" "$work/hf-llama" "$work/step-llama"

# Mixtral (MixtralForCausalLM): llama + moe, 4 experts of width 48, top 2, softmax router,
# every layer MoE, no balancing loss (transformers adds none without output_router_logits);
# trained on tp 2 x pp 2, exported from the checkpoint. A model Mixtral is not (here: shared
# experts) is refused with the reason.
cat > "$work/mixtral.yaml" <<'YAML'
name: hf-mixtral
seed: 7
model: {type: llama, vocab_size: 400, seq_len: 32, n_layer: 2, n_head: 4, n_kv_head: 2,
        d_model: 64, ffn_hidden: 96,
        moe: {num_experts: 4, top_k: 2, expert_ffn_hidden: 48, balance: none}}
data: {type: tokens, path: data, val_fraction: 0}
parallel: {tp: 2, pp: 2}
training: {steps: 3, micro_batch_size: 4, global_batch_size: 4}
optimizer: {lr: 1.0e-2, warmup_steps: 0}
YAML
"$bin" train "$work/mixtral.yaml" >/dev/null
"$bin" ckpt export "$work/runs/hf-mixtral/checkpoints" --format hf --out "$work/hf-mixtral"
grep -q '"MixtralForCausalLM"' "$work/hf-mixtral/config.json"
"$bin" inspect step "$work/mixtral.yaml" --set parallel.tp=1 --set parallel.pp=1 \
  --from "$work/runs/hf-mixtral" --out "$work/step-mixtral" >/dev/null
(cd "$here" && "$venv/bin/python" "$here/check_hf_export_mixtral.py" "$work/hf-mixtral" "$work/step-mixtral")
"$bin" train "$work/mixtral.yaml" --set model.moe.shared_experts=1 \
  --set run_dir="$work/runs/hf-shared" >/dev/null
if err=$("$bin" ckpt export "$work/runs/hf-shared/checkpoints" --format hf --out "$work/hf-shared" 2>&1); then
  echo "FAIL: a model with shared experts was exported as Mixtral"; exit 1
fi
grep -q "shared experts (Mixtral has none)" <<<"$err" || { echo "FAIL: refusal says: $err"; exit 1; }
echo "mixtral ok"
