#!/usr/bin/env python3
"""Mixture of experts against dense (issue 28 part 6), side by side in one run, one worker.

1. Speed: an 8-expert top-2 Mixtral-style llama (experts of half the dense SwiGLU width, so
   two of them cost what the dense MLP costs) against the dense llama of the same active
   FLOPs per token, on synthetic data. The runs alternate, --repeats times each; the step
   time is the median over each run's logged steps after the first (metrics.jsonl step_ms),
   and the figure is the median over the repeats. Target: MoE step time <= 1.25x dense.
2. Quality (--text): both models on tinyshakespeare with the proof script's BPE vocabulary
   (scripts/bench/proof_tinyshakespeare.py: the same tokenizer, `data prepare`, `eval`),
   equal steps, batch and seed; bits per byte on the held-out tenth. The MoE model has
   the dense model's active parameters per token (and 4x its feed-forward parameters).

3. Expert parallelism (unless --no-ep): scripts/bench/bench_moe_ep.py in the same
   invocation, an MoE model at dp 2 with ep 2 against ep 1 (tokens/s, the all-to-all's
   share of the step).

Prints one JSON line per case and a markdown table (docs/benchmarks.md).
Usage (a Python with `tokenizers`, e.g. build/hfvenv or build/tokvenv):
  build/hfvenv/bin/python scripts/bench/bench_moe.py [--trainctl build/trainctl]
      [--text ../shared/data/tinyshakespeare.txt] [--steps 300] [--out /tmp/bench-moe]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SPEC = """\
name: {name}
seed: 1337
device: cpu
run_dir: {run_dir}
model:
  type: llama
  vocab_size: {vocab}
  n_layer: {n_layer}
  n_head: {n_head}
  d_model: {d_model}
  seq_len: {seq_len}
  ffn_hidden: {ffn}
{moe}data:
{data}
parallel: {{dp: 1, tp: 1, pp: 1}}
training:
  steps: {steps}
  micro_batch_size: {batch}
  global_batch_size: {batch}
  grad_clip: 1.0
  eval_every: 0
  eval_batches: {eval_batches}
  threads: {threads}
optimizer:
  type: adamw
  lr: {lr}
  betas: [0.9, 0.95]
  weight_decay: 0.1
  warmup_steps: {warmup}
  decay: cosine
  min_lr: {min_lr}
precision: {{compute: fp32}}
checkpoint: {{every_steps: 0}}
logging: {{every_steps: {log_every}, tensorboard: false}}
"""


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True, file=sys.stderr)
    return subprocess.run(cmd, check=True, encoding="utf-8", errors="replace", **kw)


def moe_block(args):
    if args.experts == 0:
        return ""
    return (f"  moe: {{num_experts: {args.experts}, top_k: {args.top_k}, "
            f"expert_ffn_hidden: {args.ffn // args.top_k}, balance: {args.balance}}}\n")


def write_spec(args, out, name, moe, data, vocab, steps, log_every, lr, eval_batches):
    run_dir = os.path.join(out, "runs", name)
    shutil.rmtree(run_dir, ignore_errors=True)  # a fresh run, not a resume
    spec = os.path.join(out, name + ".yaml")
    with open(spec, "w") as f:
        f.write(SPEC.format(name=name, run_dir=run_dir, vocab=vocab, n_layer=args.n_layer,
                            n_head=args.n_head, d_model=args.d_model, seq_len=args.seq_len,
                            ffn=args.ffn, moe=moe, data=data, steps=steps, batch=args.batch,
                            threads=args.threads, warmup=max(1, steps // 20), lr=lr,
                            min_lr=lr / 10, log_every=log_every, eval_batches=eval_batches))
    return spec, run_dir


def params_line(tc, spec):
    out = run([tc, "validate", spec], capture_output=True).stdout
    for line in out.splitlines():
        if line.strip().startswith("parameters:"):
            return line.split(":", 1)[1].strip()
    return "?"


def step_ms(run_dir):
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    return statistics.median(r["step_ms"] for r in rows[1:]), rows[-1]


def speed(args, tc):
    data = "  type: synthetic"
    times = {"dense": [], "moe": []}
    for rep in range(args.repeats):
        for kind in ("dense", "moe"):
            a = argparse.Namespace(**vars(args))
            if kind == "dense":
                a.experts = 0
            spec, run_dir = write_spec(a, args.out, f"speed-{kind}", moe_block(a), data, 256,
                                       args.speed_steps, 1, 1e-3, 1)
            run([tc, "train", spec], capture_output=True)
            ms, _ = step_ms(run_dir)
            times[kind].append(ms)
            if rep == 0:
                print(json.dumps({"case": "speed", "model": kind,
                                  "parameters": params_line(tc, spec)}), flush=True)
    rows = {k: statistics.median(v) for k, v in times.items()}
    for kind in ("dense", "moe"):
        print(json.dumps({"case": "speed", "model": kind, "step_ms": round(rows[kind], 2),
                          "step_ms_runs": [round(t, 2) for t in times[kind]]}), flush=True)
    ratio = rows["moe"] / rows["dense"]
    print(json.dumps({"case": "speed", "moe_over_dense": round(ratio, 3), "target": 1.25,
                      "ok": ratio <= 1.25}), flush=True)
    return rows, ratio


def quality(args, tc):
    import proof_tinyshakespeare as proof

    raw = open(args.text, "rb").read()
    cut = len(raw) - int(len(raw) * args.val_fraction)
    train_text = os.path.join(args.out, "train_part.txt")
    with open(train_text, "wb") as f:
        f.write(raw[:cut])
    tok_path, vocab = proof.train_tokenizer(train_text, args.vocab,
                                            os.path.join(args.out, "tokenizer"))
    data_dir = os.path.join(args.out, "data")
    shutil.rmtree(data_dir, ignore_errors=True)
    run([tc, "data", "prepare", "--tokenizer", tok_path, "--input", os.path.abspath(args.text),
         "--out", data_dir, "--val-fraction", str(args.val_fraction)], capture_output=True)
    padded = (vocab + 63) // 64 * 64
    rows = []
    for kind in args.models.split(","):
        a = argparse.Namespace(**vars(args))
        if kind == "dense":
            a.experts = 0
        spec, run_dir = write_spec(a, args.out, f"text-{kind}", moe_block(a),
                                   f"  type: tokens\n  path: {data_dir}", padded, args.steps,
                                   50, args.lr, 40)
        t0 = time.time()
        run([tc, "train", spec], capture_output=True)
        wall = time.time() - t0
        loss, bpb, tokens, nbytes = proof.eval_line(tc, spec, run_dir)
        row = dict(case="text", model=kind, parameters=params_line(tc, spec), val_loss=loss,
                   bits_per_byte=bpb, train_s=round(wall, 1))
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows, vocab


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    ap.add_argument("--text", default=os.path.join(ROOT, "..", "shared", "data",
                                                   "tinyshakespeare.txt"))
    ap.add_argument("--no-text", action="store_true", help="the speed comparison only")
    ap.add_argument("--no-speed", action="store_true", help="the text comparison only")
    ap.add_argument("--no-ep", action="store_true", help="skip bench_moe_ep.py (ep 2 vs ep 1)")
    ap.add_argument("--models", default="dense,moe", help="the text comparison's models")
    ap.add_argument("--out", default="/tmp/bench-moe")
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--balance", default="aux_loss", choices=["aux_loss", "bias", "none"])
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--ffn", type=int, default=384, help="the dense SwiGLU width")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--speed-steps", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--val-fraction", type=float, default=0.1)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tc = os.path.abspath(args.trainctl)
    if not args.no_speed:
        speed_table(args, tc)
    if not args.no_ep:
        print("\n$ scripts/bench/bench_moe_ep.py (expert parallelism: ep 2 vs ep 1 at dp 2)", flush=True)
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench", "bench_moe_ep.py"),
                        "--trainctl", tc], check=True)
    if args.no_text:
        return
    text_table(args, tc)


def speed_table(args, tc):
    times, ratio = speed(args, tc)
    shape = (f"llama L{args.n_layer}/C{args.d_model}/H{args.n_head}/T{args.seq_len}/"
             f"B{args.batch}, dense SwiGLU {args.ffn} vs {args.experts} experts x "
             f"{args.ffn // args.top_k} top-{args.top_k} ({args.balance}), one worker, "
             f"{args.threads} threads")
    print(f"\n{shape}\n")
    print("| model | step ms (median) | MoE / dense |")
    print("|---|---:|---:|")
    print(f"| dense | {times['dense']:.1f} | |")
    print(f"| moe | {times['moe']:.1f} | {ratio:.3f} |")


def text_table(args, tc):
    if not os.path.exists(args.text):
        sys.exit(f"{args.text}: not found (pass --text, or --no-text)")
    rows, vocab = quality(args, tc)
    print(f"\ntinyshakespeare, BPE vocabulary {vocab}, {args.steps} steps of {args.batch} x "
          f"{args.seq_len} tokens, lr {args.lr}\n")
    print("| model | parameters | val loss (nats/token) | bits per byte | train s |")
    print("|---|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | {r['parameters']} | {r['val_loss']:.4f} | "
              f"{r['bits_per_byte']:.4f} | {r['train_s']} |")


if __name__ == "__main__":
    main()
