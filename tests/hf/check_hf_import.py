"""Checks of model.init_from / `ckpt import` against transformers 4.36.2 (check_hf_import.sh).

  check_hf_import.py first HF_DIR STEP_DIR METRICS...
      STEP_DIR: `trainctl inspect step` of the job (model.init_from: HF_DIR) over its whole
      first global batch. Its weights equal HF_DIR's tensors exactly (F32, or BF16 widened;
      GPT-2's Conv1D weights transposed); transformers' loss on the batch equals every run's
      first logged loss (METRICS: metrics.jsonl of runs on different layouts) within 1e-5
      relative.
  check_hf_import.py roundtrip EXPORT_DIR STEP_DIR [OTHER_EXPORT_DIR]
      EXPORT_DIR: the run's `ckpt export --format hf` after training; STEP_DIR: `inspect step
      --from` that run. transformers reloads the export and gives trainctl's loss (1e-5) and
      the logits of a model holding trainctl's weights as they are (1e-6); OTHER_EXPORT_DIR
      (the same job on another layout) gives the same logits within 1e-4.
  check_hf_import.py weights HF_DIR STEP_DIR OTHER_STEP_DIR
      Without an export (Mixtral's does not exist yet): HF_DIR's architecture holding
      STEP_DIR's weights (`inspect step --from` a run) gives trainctl's loss (1e-5), and
      holding OTHER_STEP_DIR's (the same job on another layout) the same logits (1e-4).
  check_hf_import.py same_tensors DIR_A DIR_B
      The two folders hold the same tensors, bit for bit (import -> export round trip).
"""
import glob
import json
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForCausalLM

CONV1D = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight")
failures = []


def rel_err(a, b):
    return ((a - b).norm() / max(b.norm().item(), 1e-30)).item()


def expect(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def hf_tensors(d):
    out = {}
    for f in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        out.update(load_file(f))
    return out


def load(d):
    model = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32)
    model.eval()
    return model


def batch_loss(model, step_dir):
    batch = load_file(os.path.join(step_dir, "batch.safetensors"))
    idx, targets = batch["tokens"].long(), batch["targets"].long()
    with torch.no_grad():
        logits = model(input_ids=idx).logits
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1)).item(), logits


def first_loss(metrics):
    for line in open(metrics):
        j = json.loads(line)
        if j.get("step") == 1 and "loss" in j:
            return j["loss"]
    raise SystemExit(f"{metrics}: no loss logged at step 1")


def as_trainctl(name, t):
    return t.t().contiguous() if name.endswith(CONV1D) else t


def first(hf_dir, step_dir, *metrics):
    hf = hf_tensors(hf_dir)
    weights = load_file(os.path.join(step_dir, "weights.safetensors"))
    for name, w in weights.items():
        h = as_trainctl(name, hf[name].float())
        if name == "transformer.wpe.weight":
            h = h[: w.shape[0]]
        expect(torch.equal(w, h), f"imported {name} {tuple(w.shape)} equals {hf_dir}'s")
    loss, _ = batch_loss(load(hf_dir), step_dir)
    info = json.load(open(os.path.join(step_dir, "step.json")))
    e = abs(info["loss"] - loss) / abs(loss)
    expect(e < 1e-5, f"inspect step's loss {info['loss']:.8f} vs transformers {loss:.8f}: {e:.1e}")
    for m in metrics:
        got = first_loss(m)
        e = abs(got - loss) / abs(loss)
        expect(e < 1e-5, f"{m}: first loss {got:.8f} vs transformers {loss:.8f}: rel.err {e:.1e}")


def with_weights(config, step_dir):
    """The architecture of `config` holding trainctl's weights from STEP_DIR as they are."""
    weights = load_file(os.path.join(step_dir, "weights.safetensors"))
    ref = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    ref.eval()
    state = {n: as_trainctl(n, t) for n, t in weights.items()}
    missing, unexpected = ref.load_state_dict(state, strict=False)
    missing = [n for n in missing if not n.endswith((".attn.bias", ".attn.masked_bias"))
               and not (n == "lm_head.weight" and config.tie_word_embeddings)]
    expect(not missing and not unexpected, f"trainctl's weights fill the model ({missing}, {unexpected})")
    if config.tie_word_embeddings:
        ref.tie_weights()
    return ref


def roundtrip(export_dir, step_dir, other=None):
    model = load(export_dir)
    loss, logits = batch_loss(model, step_dir)
    info = json.load(open(os.path.join(step_dir, "step.json")))
    e = abs(info["loss"] - loss) / abs(loss)
    expect(e < 1e-5, f"reloaded export: loss {loss:.8f} vs trainctl {info['loss']:.8f}: {e:.1e}")
    _, ref_logits = batch_loss(with_weights(model.config, step_dir), step_dir)
    e = rel_err(logits, ref_logits)
    expect(e < 1e-6, f"reloaded export's logits vs trainctl's weights: rel.err {e:.1e}")
    if other:
        _, other_logits = batch_loss(load(other), step_dir)
        e = rel_err(other_logits, logits)
        expect(e < 1e-4, f"{other} (another layout) logits: rel.err {e:.1e}")


def weights(hf_dir, step_dir, other_step_dir):
    config = AutoConfig.from_pretrained(hf_dir)
    loss, logits = batch_loss(with_weights(config, step_dir), step_dir)
    info = json.load(open(os.path.join(step_dir, "step.json")))
    e = abs(info["loss"] - loss) / abs(loss)
    expect(e < 1e-5, f"{type(config).__name__} with trainctl's weights: loss {loss:.8f} vs "
                     f"trainctl {info['loss']:.8f}: {e:.1e}")
    _, other_logits = batch_loss(with_weights(config, other_step_dir), step_dir)
    e = rel_err(other_logits, logits)
    expect(e < 1e-4, f"{other_step_dir} (another layout) logits: rel.err {e:.1e}")


def same_tensors(a, b):
    ta, tb = hf_tensors(a), hf_tensors(b)
    expect(sorted(ta) == sorted(tb), f"{a} and {b} hold the same tensor names")
    for name in sorted(set(ta) & set(tb)):
        if not torch.equal(ta[name].float(), tb[name].float()):
            expect(False, f"{name} differs between {a} and {b}")
    print(f"compared {len(ta)} tensors")


if __name__ == "__main__":
    torch.set_num_threads(1)
    {"first": first, "roundtrip": roundtrip, "weights": weights, "same_tensors": same_tensors}[sys.argv[1]](*sys.argv[2:])
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
