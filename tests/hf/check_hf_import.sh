#!/usr/bin/env bash
# model.init_from and `trainctl ckpt import` against Hugging Face transformers 4.36.2 (PyPI,
# over Debian's python3-torch): small random GPT2LMHeadModel and LlamaForCausalLM (GQA,
# untied head; also saved in bf16) written by save_pretrained in shards
# (make_hf_import_models.py) are imported on one worker and on dp2 x tp2 x pp2:
#   - the imported weights equal the files' tensors, and the first batch's loss equals
#     transformers' within 1e-5 on both layouts (check_hf_import.py first);
#   - after 20 steps the export reloads in transformers with trainctl's loss and the logits
#     of trainctl's weights, and the two layouts' exports agree (check_hf_import.py roundtrip);
#   - `ckpt import` then `ckpt export --format hf` gives the folder's tensors back bit for
#     bit, and `train --resume` from the imported checkpoint starts at transformers' loss;
#   - bad folders (no config.json, another architecture, a tensor of the wrong shape or
#     dtype, a missing shard) and a spec key contradicting config.json exit 2 before any
#     worker starts, naming the file (or the key).
# Usage: check_hf_import.sh TRAINCTL_BINARY. Exit 77 (skipped) when PyPI cannot be reached.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:-$root/build/trainctl}
source "$here/hf_venv.sh"
py() { OMP_NUM_THREADS=1 "$venv/bin/python" "$@"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
py "$here/make_hf_import_models.py" "$work" 2>&1 | grep -v -i warn

# job NAME FOLDER [extra model keys] [export_hf]: 20 steps from FOLDER, checkpoint (and
# export, unless "false") at the end.
job() {
  cat > "$work/$1.yaml" <<YAML
name: $1
seed: 11
model: {init_from: $2$3}
data: {type: tokens, path: tokens.bin, val_fraction: 0}
training: {steps: 20, micro_batch_size: 2, global_batch_size: 8}
optimizer: {lr: 1.0e-3, warmup_steps: 0}
checkpoint: {every_steps: 20, export_hf: ${4:-true}}
logging: {every_steps: 1}
YAML
}
whole_batch=(--set training.micro_batch_size=8)
layout3d=(--set parallel.dp=2 --set parallel.tp=2 --set parallel.pp=2)

for model in gpt2 llama llama-bf16; do
  echo "== $model"
  extra=""
  [[ $model == llama* ]] && extra=", seq_len: 16"
  job "$model" "$model" "$extra"
  job "$model-3d" "$model" "$extra"
  "$bin" validate "$work/$model.yaml" | grep "init_from:"
  "$bin" inspect step "$work/$model.yaml" "${whole_batch[@]}" --out "$work/$model-step0" >/dev/null
  "$bin" train "$work/$model.yaml" >/dev/null
  "$bin" train "$work/$model-3d.yaml" "${layout3d[@]}" >/dev/null
  py "$here/check_hf_import.py" first "$work/$model" "$work/$model-step0" \
    "$work/runs/$model/metrics.jsonl" "$work/runs/$model-3d/metrics.jsonl"
  "$bin" inspect step "$work/$model.yaml" "${whole_batch[@]}" --from "$work/runs/$model" \
    --out "$work/$model-step20" >/dev/null
  py "$here/check_hf_import.py" roundtrip "$work/runs/$model/hf" "$work/$model-step20" \
    "$work/runs/$model-3d/hf"
done

echo "== mixtral"
# MixtralForCausalLM: no Hugging Face export of MoE models yet, so after 20 steps trainctl's
# weights are loaded into transformers' Mixtral directly.
job mixtral mixtral ", seq_len: 16" false
job mixtral-3d mixtral ", seq_len: 16" false
"$bin" inspect step "$work/mixtral.yaml" "${whole_batch[@]}" --out "$work/mixtral-step0" >/dev/null
"$bin" train "$work/mixtral.yaml" >/dev/null
"$bin" train "$work/mixtral-3d.yaml" "${layout3d[@]}" >/dev/null
py "$here/check_hf_import.py" first "$work/mixtral" "$work/mixtral-step0" \
  "$work/runs/mixtral/metrics.jsonl" "$work/runs/mixtral-3d/metrics.jsonl"
for run in mixtral mixtral-3d; do
  "$bin" inspect step "$work/mixtral.yaml" "${whole_batch[@]}" --from "$work/runs/$run" \
    --out "$work/$run-step20" >/dev/null
done
py "$here/check_hf_import.py" weights "$work/mixtral" "$work/mixtral-step20" "$work/mixtral-3d-step20"

echo "== resume wins over init_from"
# The run's own checkpoint (step 20) is where a longer run continues, not the folder.
"$bin" train "$work/gpt2.yaml" --set training.steps=22 --set checkpoint.export_hf=false \
  >"$work/resume.log" 2>&1
if ! grep -q "resumed from .*step 20" "$work/resume.log" ||
    grep -q "initialised the parameters from" "$work/resume.log"; then
  echo "FAIL: a run with a checkpoint did not resume from it:"; cat "$work/resume.log"; exit 1
fi
echo "ok   resumed from step 20, model.init_from not read"

echo "== ckpt import"
for model in gpt2 llama; do
  "$bin" ckpt import "$work/$model" --out "$work/ckpt-$model"
  "$bin" ckpt verify "$work/ckpt-$model" >/dev/null
  "$bin" ckpt export "$work/ckpt-$model" --format hf --out "$work/reexport-$model" >/dev/null
  py "$here/check_hf_import.py" same_tensors "$work/$model" "$work/reexport-$model"
  # Resumed from the imported checkpoint on tp 2 (a fresh optimizer): transformers' first
  # loss. The checkpoint's seq_len is config.json's (Llama: max_position_embeddings, 64).
  seq=(--set model.seq_len=16)
  [[ $model == llama ]] && seq=(--set model.seq_len=64)
  sed -e "s/^name: .*/name: $model-resume/" "$work/$model.yaml" >"$work/$model-resume.yaml"
  "$bin" inspect step "$work/$model-resume.yaml" "${seq[@]}" "${whole_batch[@]}" \
    --out "$work/$model-resume-step0" >/dev/null
  "$bin" train "$work/$model-resume.yaml" "${seq[@]}" --resume "$work/ckpt-$model" \
    --set parallel.tp=2 --set training.steps=2 >/dev/null
  py "$here/check_hf_import.py" first "$work/$model" "$work/$model-resume-step0" \
    "$work/runs/$model-resume/metrics.jsonl"
done

"$bin" ckpt import "$work/mixtral" --out "$work/ckpt-mixtral"
"$bin" ckpt verify "$work/ckpt-mixtral" >/dev/null

echo "== bad input"
# refused WHAT EXPECTED_TEXT ARGS...: exit 2, EXPECTED_TEXT on stderr, no run directory.
refused() {
  local what=$1 text=$2
  shift 2
  local rc=0
  "$@" >"$work/out.txt" 2>"$work/err.txt" || rc=$?
  if [[ $rc -ne 2 ]] || ! grep -qF -- "$text" "$work/err.txt"; then
    echo "FAIL: $what: exit $rc (want 2), stderr:"; cat "$work/err.txt"
    exit 1
  fi
  echo "ok   $what: $(head -c 300 "$work/err.txt")"
}
bad() {  # bad NAME: a copy of the gpt2 folder and a job importing it
  rm -rf "${work:?}/$1"
  cp -r "$work/gpt2" "$work/$1"
  job "$1" "$1" ""
}
bad noconfig
rm "$work/noconfig/config.json"
refused "no config.json" "noconfig/config.json" "$bin" validate "$work/noconfig.yaml"
refused "no config.json (import)" "noconfig/config.json" \
  "$bin" ckpt import "$work/noconfig" --out "$work/ckpt-bad"
bad bert
sed -i 's/GPT2LMHeadModel/BertForMaskedLM/' "$work/bert/config.json"
refused "unsupported architectures" "bert/config.json" "$bin" train "$work/bert.yaml"
bad noshard
rm "$work/noshard/model-00002-of-00004.safetensors"
refused "missing shard" "noshard/model-00002-of-00004.safetensors" "$bin" train "$work/noshard.yaml"
refused "missing shard (import)" "noshard/model-00002-of-00004.safetensors" \
  "$bin" ckpt import "$work/noshard" --out "$work/ckpt-bad"
bad shape
bad dtype
py - "$work/shape" "$work/dtype" <<'PY'
import glob, sys, torch
from safetensors.torch import load_file, save_file
for folder, change in ((sys.argv[1], lambda t: t[:-1]), (sys.argv[2], lambda t: t.to(torch.int32))):
    for f in sorted(glob.glob(folder + "/model-*.safetensors")):
        ts = load_file(f)
        if "transformer.h.1.ln_2.weight" in ts:
            ts["transformer.h.1.ln_2.weight"] = change(ts["transformer.h.1.ln_2.weight"]).contiguous()
            save_file(ts, f, metadata={"format": "pt"})
PY
refused "wrong shape" "transformer.h.1.ln_2.weight is [31]" "$bin" train "$work/shape.yaml"
refused "wrong dtype" "transformer.h.1.ln_2.weight is I32" "$bin" validate "$work/dtype.yaml"
job disagree gpt2 ", n_layer: 3"
refused "spec key contradicting config.json" "model.n_layer: is 3 but model.init_from's" \
  "$bin" validate "$work/disagree.yaml"
for name in noconfig bert noshard shape dtype disagree; do
  if [[ -e $work/runs/$name ]]; then echo "FAIL: $name: a run directory was made"; exit 1; fi
done
echo "all import checks passed"
