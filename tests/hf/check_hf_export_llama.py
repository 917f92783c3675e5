"""Loads a llama `trainctl ckpt export --format hf` folder with transformers'
AutoModelForCausalLM (LlamaForCausalLM) and compares it with trainctl on one batch.

Usage: check_hf_export_llama.py HF_DIR STEP_DIR
STEP_DIR is `trainctl inspect step --from RUN` output for the same checkpoint. Checks, in
fp32:
  - the loss transformers computes on the batch equals trainctl's forward (relative error
    < 1e-5) and its gradients equal trainctl's backward (< 1e-4), tensor by tensor under
    the same names;
  - its logits equal those of a small independent Llama written below (RMSNorm, rotate_half
    RoPE, grouped-query attention, SwiGLU) loaded with trainctl's weights (< 1e-4).
"""
import json
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def rel_err(a, b):
    return ((a - b).norm() / max(b.norm().item(), 1e-30)).item()


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, theta):  # x [B, H, T, hd]
    hd, T = x.size(-1), x.size(-2)
    inv = 1.0 / theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd)
    ang = torch.outer(torch.arange(T, dtype=torch.float32), inv)
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


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
        g = h @ w[p + "mlp.gate_proj.weight"].t()
        u = h @ w[p + "mlp.up_proj.weight"].t()
        x = x + (F.silu(g) * u) @ w[p + "mlp.down_proj.weight"].t()
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
    if type(model).__name__ != "LlamaForCausalLM":
        failures.append(f"expected LlamaForCausalLM, got {type(model).__name__}")
    cfg = json.load(open(f"{hf_dir}/config.json"))
    # Explicit special ids (issue 37): the exported tokenizer's end-of-text token, not
    # transformers' Llama defaults (bos 1, eos 2: real bytes here); floats as written.
    eot = [t["id"] for t in json.load(open(f"{hf_dir}/tokenizer.json"))["added_tokens"]
           if t["content"] == "<|endoftext|>"]
    for key in ("bos_token_id", "eos_token_id"):
        if [cfg.get(key, "missing")] != eot or getattr(model.config, key) != eot[0]:
            failures.append(f"config.json {key} is {cfg.get(key, 'missing')}; the tokenizer's "
                            f"<|endoftext|> is {eot}")
    if '"rms_norm_eps": 1e-05' not in open(f"{hf_dir}/config.json").read():
        failures.append("config.json does not write rms_norm_eps as 1e-05")
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
        e = rel_err(named[name].grad, g)
        worst = max(worst, e)
        if e >= 1e-4:
            failures.append(f"gradient {name}: rel.err {e:.2e} >= 1e-4")
    print(f"gradients: {len(grads)} tensors, worst relative error {worst:.2e}")

    with torch.no_grad():
        ref = reference_logits(load_file(f"{step_dir}/weights.safetensors"), cfg, idx)
    e = rel_err(logits.detach(), ref)
    print(f"logits {tuple(logits.shape)}: relative error {e:.2e} against a plain Llama with trainctl's weights")
    if e >= 1e-4:
        failures.append(f"logits rel.err {e:.2e} >= 1e-4")

    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main(*sys.argv[1:3])
