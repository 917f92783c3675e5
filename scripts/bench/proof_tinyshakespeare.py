#!/usr/bin/env python3
"""Real text, end to end (issue 20 part 6): a small Llama on BPE tokens against the byte-level
GPT of the same size and steps, both on tinyshakespeare, compared in bits per byte.

What it runs, every step through trainctl's own commands:
  1. a byte-level BPE vocabulary of --vocab tokens trained with Hugging Face `tokenizers`
     (Llama 3's split pattern; tests/tokenizer/train_tokenizers.py) on the training part of
     the text only (the last --val-fraction is held out, as `data prepare` and the byte-level
     job hold it out);
  2. `trainctl data prepare` → token shards + manifest;
  3. `trainctl train` of a llama (BPE) and of a gpt (bytes, vocab 256): same n_layer,
     d_model, n_head, seq_len, batch, steps, seed and optimizer;
  4. `trainctl eval` of each final checkpoint → validation loss and bits per byte (the loss in
     nats per token times tokens per byte / ln 2, so the two vocabularies are comparable);
  5. `trainctl sample` of each, same prompt and seed.
Prints one JSON line per model and a markdown table for the README.

Usage (a Python with `tokenizers`, e.g. the tests' venv build/tokvenv):
  build/tokvenv/bin/python scripts/bench/proof_tinyshakespeare.py [--trainctl build/trainctl]
      [--text ../shared/data/tinyshakespeare.txt] [--steps 600] [--out /tmp/proof]
This is a benchmark, not a test: it takes minutes (about 15 on 2 cores with the defaults).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "tokenizer"))

SPEC = """\
name: {name}
seed: 1337
device: cpu
model:
{model}
data:
{data}
parallel: {{dp: {dp}, tp: 1, pp: 1}}
training:
  steps: {steps}
  micro_batch_size: {batch}
  global_batch_size: {global_batch}
  grad_clip: 1.0
  eval_every: 0
  eval_batches: {eval_batches}
  threads: {threads}
optimizer:
  type: adamw
  lr: 1.0e-3
  betas: [0.9, 0.95]
  weight_decay: 0.1
  warmup_steps: {warmup}
  decay: cosine
  min_lr: 1.0e-4
precision: {{compute: fp32}}
checkpoint: {{every_steps: 0}}
logging: {{every_steps: 50}}
"""


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    # Samples of an undertrained byte-level model need not be UTF-8.
    return subprocess.run(cmd, check=True, encoding="utf-8", errors="replace", **kw)


def train_tokenizer(train_text, vocab, out_dir):
    from tokenizers import trainers, pre_tokenizers
    import train_tokenizers

    tok = train_tokenizers.build("llama3")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, min_frequency=2, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([train_text], trainer)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "tokenizer.json")
    tok.save(path)
    return path, tok.get_vocab_size()


def eval_line(trainctl, spec, run_dir):
    out = run([trainctl, "eval", spec, "--from", run_dir], capture_output=True).stdout
    m = re.search(r"val_loss ([0-9.]+), bits per byte ([0-9.]+) \((\d+) tokens, (\d+) bytes\)", out)
    if not m:
        sys.exit(f"cannot read the eval result from:\n{out}")
    return float(m.group(1)), float(m.group(2)), int(m.group(3)), int(m.group(4))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    ap.add_argument("--text", default=os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"))
    ap.add_argument("--out", default="/tmp/trainctl-proof")
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="compute threads per worker")
    ap.add_argument("--val-fraction", type=float, default=0.1)
    ap.add_argument("--prompt", default="ROMEO:")
    args = ap.parse_args()
    if not os.path.exists(args.text):
        sys.exit(f"{args.text}: not found (pass --text)")
    os.makedirs(args.out, exist_ok=True)
    tc = os.path.abspath(args.trainctl)

    # The byte-level job holds out the last val_fraction of the bytes; the tokenizer is trained
    # on the rest only, so neither model has seen the validation text in any form.
    raw = open(args.text, "rb").read()
    cut = len(raw) - int(len(raw) * args.val_fraction)
    train_text = os.path.join(args.out, "train_part.txt")
    with open(train_text, "wb") as f:
        f.write(raw[:cut])
    tok_path, vocab = train_tokenizer(train_text, args.vocab, os.path.join(args.out, "tokenizer"))
    data_dir = os.path.join(args.out, "data")
    if os.path.exists(os.path.join(data_dir, "manifest.json")):
        shutil.rmtree(data_dir)
    run([tc, "data", "prepare", "--tokenizer", tok_path, "--input", os.path.abspath(args.text),
         "--out", data_dir, "--val-fraction", str(args.val_fraction)])

    common = dict(steps=args.steps, batch=args.batch, global_batch=args.batch * args.dp,
                  dp=args.dp, threads=args.threads, warmup=max(1, args.steps // 20),
                  eval_batches=20)
    dims = (f"  n_layer: {args.n_layer}\n  n_head: {args.n_head}\n  d_model: {args.d_model}\n"
            f"  seq_len: {args.seq_len}\n")
    padded_vocab = (vocab + 63) // 64 * 64
    jobs = {
        "gpt-bytes": SPEC.format(
            name="proof-gpt-bytes", model=f"  type: gpt\n  vocab_size: 256\n{dims}",
            data=f"  type: text\n  path: {os.path.abspath(args.text)}\n"
                 f"  val_fraction: {args.val_fraction}", **common),
        "llama-bpe": SPEC.format(
            name="proof-llama-bpe", model=f"  type: llama\n  vocab_size: {padded_vocab}\n{dims}",
            data=f"  type: tokens\n  path: {data_dir}", **common),
    }
    rows = []
    for name, text in jobs.items():
        spec = os.path.join(args.out, f"{name}.yaml")
        run_dir = os.path.join(args.out, "runs", name)
        with open(spec, "w") as f:
            f.write(text + f"run_dir: {run_dir}\n")
        shutil.rmtree(run_dir, ignore_errors=True)  # a fresh run, not a resume
        t0 = time.time()
        run([tc, "train", spec])
        wall = time.time() - t0
        loss, bpb, tokens, nbytes = eval_line(tc, spec, run_dir)
        sample = run([tc, "sample", run_dir, "--prompt", args.prompt, "--max-new-tokens", "120",
                      "--temperature", "0.8", "--top-k", "40", "--seed", "1"],
                     capture_output=True).stdout
        row = dict(model=name, val_loss=loss, bits_per_byte=bpb, bytes_per_token=nbytes / tokens,
                   train_s=round(wall, 1), sample=sample.strip())
        print(json.dumps(row), flush=True)
        rows.append(row)

    print(f"\n{args.n_layer} layers, d_model {args.d_model}, {args.n_head} heads, seq_len "
          f"{args.seq_len}, {args.steps} steps of {args.batch * args.dp} sequences, dp {args.dp}; "
          f"BPE vocabulary {vocab} (Llama 3 split pattern)\n")
    print("| model | tokens | val loss (nats/token) | bytes/token | bits per byte | train s |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        kind = "BPE" if r["model"].startswith("llama") else "bytes"
        print(f"| {r['model']} | {kind} | {r['val_loss']:.4f} | {r['bytes_per_token']:.2f} | "
              f"{r['bits_per_byte']:.4f} | {r['train_s']} |")
    for r in rows:
        print(f"\n{r['model']} sample (prompt {args.prompt!r}, seed 1):\n```\n{r['sample']}\n```")


if __name__ == "__main__":
    main()
