#!/usr/bin/python3
"""Independent check of trainctl's GPT against PyTorch (DESIGN.md, correctness proof 4).

`trainctl inspect step JOB.yaml --out DIR` runs the first training step of a job on one
worker and writes the initial weights, the batch, the loss, the gradients and the weights
after the optimizer step. This script builds the same GPT in PyTorch (nanoGPT's module
and parameter names), loads those weights through the `safetensors` package, runs the
same batch and the same AdamW step, and compares.

Usage: check_against_torch.py DIR [MODEL.safetensors]   (exit 0 when everything matches)
With MODEL (a run's exported model of the same job), it is also loaded into the PyTorch
GPT, and its loss on the batch must be finite and below the initial one.
"""
import json
import math
import sys

import torch
import torch.nn as nn
from torch.nn import functional as F
from safetensors.torch import load_file


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head = c["n_head"]
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"])

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"])
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"])

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c["n_embd"])
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c["n_embd"])
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab_size"], c["n_embd"]),
            wpe=nn.Embedding(c["block_size"], c["n_embd"]),
            h=nn.ModuleList([Block(c) for _ in range(c["n_layer"])]),
            ln_f=nn.LayerNorm(c["n_embd"]),
        ))
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied, as nanoGPT

    def forward(self, idx, targets):
        T = idx.size(1)
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                               ignore_index=-1)


def rel_err(a, b):
    return ((a - b).norm() / max(b.norm().item(), 1e-30)).item()


def main(out_dir, model_path=None, exported_path=None):
    info = json.load(open(f"{out_dir}/step.json"))
    weights = load_file(f"{out_dir}/weights.safetensors")
    batch = load_file(f"{out_dir}/batch.safetensors")
    grads = load_file(f"{out_dir}/grads.safetensors")
    updated = load_file(f"{out_dir}/updated.safetensors")
    cfg = info["model"]

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = GPT(cfg)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # Only the tied head is absent from the file: it is transformer.wte.weight.
    assert missing == ["lm_head.weight"] and not unexpected, (missing, unexpected)
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()

    idx = batch["tokens"].long()
    targets = batch["targets"].long()
    loss = model(idx, targets)
    loss.backward()

    failures = []
    loss_err = abs(loss.item() - info["loss"]) / abs(loss.item())
    print(f"loss: torch {loss.item():.8f} trainctl {info['loss']:.8f} rel.err {loss_err:.2e}")
    if loss_err >= 1e-5:
        failures.append(f"loss rel.err {loss_err:.2e} >= 1e-5")

    named = dict(model.named_parameters())
    worst = 0.0
    for name, g in grads.items():
        e = rel_err(g, named[name].grad)
        worst = max(worst, e)
        if e >= 1e-4:
            failures.append(f"gradient {name}: rel.err {e:.2e} >= 1e-4")
    print(f"gradients: {len(grads)} tensors, worst relative error {worst:.2e}")
    if set(grads) != set(weights):
        failures.append("gradient names differ from parameter names")

    # The same optimizer step: global-norm clipping, then AdamW with nanoGPT's groups.
    opt = info["optimizer"]
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(),
                                          opt["grad_clip"] if opt["grad_clip"] > 0 else 1e30)
    norm_err = abs(norm.item() - info["grad_norm"]) / norm.item()
    print(f"grad norm: torch {norm.item():.6f} trainctl {info['grad_norm']:.6f} rel.err {norm_err:.2e}")
    if norm_err >= 1e-5:
        failures.append(f"grad norm rel.err {norm_err:.2e}")
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    adamw = torch.optim.AdamW(
        [{"params": decay, "weight_decay": opt["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"])
    clipped = {n: p.grad.detach().clone() for n, p in named.items()}
    before = {n: p.detach().clone() for n, p in named.items()}
    adamw.step()
    # AdamW's first step moves each weight by lr * g / (|g| + eps): where |g| is near eps
    # (e.g. the key bias, whose exact gradient is zero: softmax ignores a constant shift)
    # the direction is rounding noise in any implementation, and up to 1000 eps the
    # update still amplifies the gradient's rounding error by eps/|g|. Those elements are
    # only checked to move by at most lr (plus weight decay); all others must agree closely.
    worst, skipped = 0.0, 0
    for name, w in updated.items():
        ours, theirs = w - before[name], named[name].detach() - before[name]
        well_posed = clipped[name].abs() > 1e-5
        skipped += int((~well_posed).sum())
        e = rel_err(ours[well_posed], theirs[well_posed]) if well_posed.any() else 0.0
        # Weights near 1 (LayerNorm gains) hold a 1e-3 update only to float32's spacing
        # there: agreeing to within 2 ulp of the weights is as close as fp32 can be.
        ulp_close = (w - named[name].detach()).abs().max().item() <= \
            2 * torch.finfo(torch.float32).eps * w.abs().max().item()
        worst = max(worst, e if not ulp_close else min(e, 1e-7))
        if e >= 1e-5 and not ulp_close:
            failures.append(f"update of {name}: rel.err {e:.2e} >= 1e-5")
        bound = opt["lr"] * (1 + opt["weight_decay"] * before[name].abs().max().item()) * 1.001
        if ours[~well_posed].abs().max().item() > bound if (~well_posed).any() else False:
            failures.append(f"update of {name}: an ill-conditioned element moved more than lr")
    print(f"weights after one AdamW step: worst relative error of the update {worst:.2e} "
          f"({skipped} elements with |grad| <= 1e-5 only bounded)")

    if model_path:
        trained = GPT(cfg)
        missing, unexpected = trained.load_state_dict(load_file(model_path), strict=False)
        assert missing == ["lm_head.weight"] and not unexpected, (missing, unexpected)
        with torch.no_grad():
            trained_loss = trained(idx, targets).item()
        print(f"exported model {model_path}: loss on the batch {trained_loss:.4f} "
              f"(initial {info['loss']:.4f})")
        if not math.isfinite(trained_loss) or trained_loss >= info["loss"]:
            failures.append("the exported model did not load into a model that learned")

    if exported_path:
        # The export of a sharded checkpoint must hold exactly the parameters trainctl
        # computed with above (weights.safetensors came from the same checkpoint).
        exported = GPT(cfg)
        missing, unexpected = exported.load_state_dict(load_file(exported_path), strict=False)
        assert missing == ["lm_head.weight"] and not unexpected, (missing, unexpected)
        with torch.no_grad():
            exported_loss = exported(idx, targets).item()
        err = abs(exported_loss - info["loss"]) / abs(info["loss"])
        print(f"exported checkpoint {exported_path}: loss {exported_loss:.8f} vs trainctl "
              f"{info['loss']:.8f} rel.err {err:.2e}")
        if err >= 1e-5:
            failures.append(f"exported checkpoint loss rel.err {err:.2e} >= 1e-5")

    if failures:
        print("MISMATCH:\n  " + "\n  ".join(failures))
        return 1
    print("trainctl matches PyTorch: loss, gradients and optimizer step")
    return 0


if __name__ == "__main__":
    sys.exit(main(*[a or None for a in sys.argv[1:4]]))
