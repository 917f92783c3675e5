"""Loads a llama + moe `trainctl ckpt export --format hf` folder with transformers'
AutoModelForCausalLM (MixtralForCausalLM) and compares it with trainctl on one batch.

Usage: check_hf_export_mixtral.py HF_DIR STEP_DIR
STEP_DIR is `trainctl inspect step --from RUN` output for the same checkpoint. Checks, in
fp32:
  - the loaded class is MixtralForCausalLM;
  - the loss transformers computes on the batch equals trainctl's forward (relative error
    < 1e-5) and its gradients equal trainctl's backward (< 1e-4), tensor by tensor under
    the same names (the router's gate.weight included);
  - its logits equal those of a small independent Mixtral written below (the plain Llama of
    check_hf_export_llama.py with a softmax top-k router, renormalised gates and SwiGLU
    experts) loaded with trainctl's weights (< 1e-5).
"""
import json
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from check_hf_export_llama import rel_err, rms_norm, rope


def moe_ffn(h, w, p, cfg):
    B, T, C = h.shape
    x = h.reshape(-1, C)
    probs = (x @ w[p + "gate.weight"].t()).softmax(-1)
    top, chosen = probs.topk(cfg["num_experts_per_tok"], dim=-1)
    gates = top / top.sum(-1, keepdim=True)
    y = torch.zeros_like(x)
    for e in range(cfg["num_local_experts"]):
        q = f"{p}experts.{e}."
        out = (F.silu(x @ w[q + "w1.weight"].t()) * (x @ w[q + "w3.weight"].t())) @ w[q + "w2.weight"].t()
        weight = (gates * (chosen == e)).sum(-1, keepdim=True)  # 0 where e was not chosen
        y = y + weight * out
    return y.view(B, T, C)


def reference_logits(w, cfg, idx):
    C, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps = C // nh, cfg["rms_norm_eps"]
    B, T = idx.shape
    x = w["model.embed_tokens.weight"][idx]
    mask = torch.ones(T, T).tril().bool()
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].t()).view(B, T, nh, hd).transpose(1, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].t()).view(B, T, nkv, hd).transpose(1, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].t()).view(B, T, nkv, hd).transpose(1, 2)
        q, k = rope(q, cfg["rope_theta"]), rope(k, cfg["rope_theta"])
        k = k.repeat_interleave(nh // nkv, dim=1)
        v = v.repeat_interleave(nh // nkv, dim=1)
        att = (q @ k.transpose(-1, -2)) / hd ** 0.5
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ w[p + "self_attn.o_proj.weight"].t()
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + moe_ffn(h, w, p + "block_sparse_moe.", cfg)
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return x @ head.t()


def main(hf_dir, step_dir):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    failures = []
    model = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32)
    model.eval()
    print(f"loaded {type(model).__name__} from {hf_dir}")
    if type(model).__name__ != "MixtralForCausalLM":
        failures.append(f"expected MixtralForCausalLM, got {type(model).__name__}")
    cfg = json.load(open(f"{hf_dir}/config.json"))
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
        if name not in named:
            failures.append(f"{name}: not a parameter of the loaded model")
            continue
        # An expert no token of the batch chose has no gradient in transformers (its
        # forward skips it): trainctl's is zero.
        got = named[name].grad if named[name].grad is not None else torch.zeros_like(g)
        e = rel_err(got, g) if g.norm() > 0 else got.norm().item()
        worst = max(worst, e)
        if e >= 1e-4:
            failures.append(f"gradient {name}: rel.err {e:.2e} >= 1e-4")
    if not any(".block_sparse_moe.gate.weight" in n for n in grads):
        failures.append("no router gradient in grads.safetensors")
    print(f"gradients: {len(grads)} tensors, worst relative error {worst:.2e}")

    with torch.no_grad():
        ref = reference_logits(load_file(f"{step_dir}/weights.safetensors"), cfg, idx)
    e = rel_err(logits.detach(), ref)
    print(f"logits {tuple(logits.shape)}: relative error {e:.2e} against a plain Mixtral with trainctl's weights")
    if e >= 1e-5:
        failures.append(f"logits rel.err {e:.2e} >= 1e-5")

    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main(*sys.argv[1:3])
