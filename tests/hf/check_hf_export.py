"""Loads a `trainctl ckpt export --format hf` folder with transformers'
AutoModelForCausalLM / AutoTokenizer and compares it with trainctl on one batch.

Usage: check_hf_export.py HF_DIR STEP_DIR TEXT_FILE IDS_FILE
STEP_DIR is `trainctl inspect step --from RUN` output for the same checkpoint (weights,
batch, trainctl's loss and gradients). Checks, in fp32:
  - the loss transformers' GPT2LMHeadModel computes on the batch equals trainctl's forward
    (relative error < 1e-5) and its gradients equal trainctl's backward (< 1e-4), Conv1D
    weights transposed back: every logit feeds both;
  - its logits equal those of the independent nanoGPT model of tests/torch loaded with
    trainctl's weights (relative error < 1e-4);
  - the exported tokenizer encodes TEXT_FILE to IDS_FILE (trainctl data encode's uint32 ids).
"""
import array
import json
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
from check_against_torch import GPT  # noqa: E402

CONV1D = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight")


def rel_err(a, b):
    return ((a - b).norm() / max(b.norm().item(), 1e-30)).item()


def main(hf_dir, step_dir, text_file, ids_file):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    failures = []
    model = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32)
    model.eval()  # no dropout (the config has none either)
    print(f"loaded {type(model).__name__} from {hf_dir}")
    info = json.load(open(f"{step_dir}/step.json"))
    batch = load_file(f"{step_dir}/batch.safetensors")
    grads = load_file(f"{step_dir}/grads.safetensors")
    idx, targets = batch["tokens"].long(), batch["targets"].long()

    logits = model(input_ids=idx).logits
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
    loss.backward()
    loss_err = abs(loss.item() - info["loss"]) / abs(info["loss"])
    print(f"loss: transformers {loss.item():.8f} trainctl {info['loss']:.8f} rel.err {loss_err:.2e}")
    if loss_err >= 1e-5:
        failures.append(f"loss rel.err {loss_err:.2e} >= 1e-5")
    named = dict(model.named_parameters())
    worst = 0.0
    for name, g in grads.items():
        hf_grad = named[name].grad
        if name.endswith(CONV1D):
            hf_grad = hf_grad.t()
        e = rel_err(hf_grad, g)
        worst = max(worst, e)
        if e >= 1e-4:
            failures.append(f"gradient {name}: rel.err {e:.2e} >= 1e-4")
    print(f"gradients: {len(grads)} tensors, worst relative error {worst:.2e}")

    ref = GPT(info["model"])
    ref.load_state_dict(load_file(f"{step_dir}/weights.safetensors"), strict=False)
    with torch.no_grad():
        T = idx.size(1)
        x = ref.transformer.wte(idx) + ref.transformer.wpe(torch.arange(T))
        for block in ref.transformer.h:
            x = block(x)
        ref_logits = ref.lm_head(ref.transformer.ln_f(x))
    e = rel_err(logits.detach(), ref_logits)
    print(f"logits {tuple(logits.shape)}: relative error {e:.2e} against nanoGPT with trainctl's weights")
    if e >= 1e-4:
        failures.append(f"logits rel.err {e:.2e} >= 1e-4")

    tok = AutoTokenizer.from_pretrained(hf_dir)
    if not tok.is_fast:
        failures.append(f"AutoTokenizer loaded {type(tok).__name__}, not the fast tokenizer.json")
    text = open(text_file, encoding="utf-8", newline="").read()
    want = array.array("I")
    want.frombytes(open(ids_file, "rb").read())
    got = tok(text, add_special_tokens=False)["input_ids"]
    print(f"tokenizer {type(tok).__name__}: {len(got)} ids, equal to trainctl's: {got == list(want)}")
    if got != list(want):
        failures.append("the exported tokenizer encodes differently from trainctl")

    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main(*sys.argv[1:5])
