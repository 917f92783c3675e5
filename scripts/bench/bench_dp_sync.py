#!/usr/bin/python3
"""Communication-efficient data parallelism against synchronous allreduce, on real text.

A byte-level GPT on tinyshakespeare, dp = 2, the same seed, data and token budget for every
mode (global batch 16 x 64 tokens, --steps steps, AdamW with warm-up and cosine decay). Each
mode is one `trainctl train` run; the final validation loss comes from the last line of
metrics.jsonl (evaluated on the synchronised model after the last step) and the bytes per
step from `comm_bytes` (global rank 0, every step logged), split into the bytes of 2-D
matrices and the rest where the mode reports it. One JSON line per mode, then a Markdown
table with the differences to allreduce and the targets of issue 18:
  local SGD H = 4 and DiLoCo H = 8 within 0.05 nats of allreduce, >= 4x fewer bytes for
  local SGD H = 4; PowerSGD rank 4 within 0.05 nats, >= 8x fewer bytes on the matrices.
Not a timed test: the numbers are losses and bytes, which do not depend on the machine.
Skips (exit 0, a message) when the corpus is absent.

Usage: scripts/bench/bench_dp_sync.py [--trainctl build/trainctl] [--steps 400] [--seed 1234]
       [--optimizer adamw|sgd]
       [--corpus /work/shared/data/tinyshakespeare.txt] [--modes allreduce,local_sgd4,...]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
V, T, L, C = 256, 64, 2, 128
MODEL = f"{{vocab_size: {V}, seq_len: {T}, n_layer: {L}, n_head: 4, d_model: {C}}}"
# Elements of the GPT's 2-D weights: wte, wpe, and per block c_attn, attn.c_proj, c_fc,
# mlp.c_proj (the LM head is tied to wte). At dp = 2 a ring allreduce sends each byte once.
MATRIX_BYTES_ALLREDUCE = 4 * (V * C + T * C + L * 12 * C * C)

# name -> (parallel.* keys beyond dp, label)
MODES = {
    "allreduce": ("", "allreduce (synchronous)"),
    "local_sgd4": (", dp_sync: local_sgd, sync_every: 4", "local SGD, H = 4"),
    # The paper's outer_lr 0.7 / momentum 0.9 suit H in the hundreds: at H = 8 their steady
    # state moves ~7x the averaged inner progress per meeting and this run diverges. The
    # default since issue 18's tuning, 0.9 / 0.3, moves 1.3x; 0.8 / 0.5 (1.6x) was the first try.
    "diloco8": (", dp_sync: diloco, sync_every: 8", "DiLoCo, H = 8 (default outer_lr 0.9, Nesterov 0.3)"),
    "diloco8_lr0.8_m0.5": (", dp_sync: diloco, sync_every: 8, outer_lr: 0.8, outer_momentum: 0.5",
                           "DiLoCo, H = 8 (outer_lr 0.8, Nesterov 0.5)"),
    "powersgd4": (", grad_compression: powersgd, powersgd_rank: 4", "PowerSGD, rank 4"),
    # The first 20 steps (the learning-rate warm-up) uncompressed, like PyTorch's
    # start_powerSGD_iter; they are counted in bytes/step.
    "powersgd4_warmup20": (", grad_compression: powersgd, powersgd_rank: 4, powersgd_warmup_steps: 20",
                           "PowerSGD, rank 4, 20 warm-up steps"),
}


# --optimizer sgd: momentum SGD (momentum 0.9, no weight decay), the setting of the PowerSGD
# paper; lr 0.1 was the best of 0.05, 0.1, 0.3 and 1.0 for allreduce.
OPTIMIZERS = {
    "adamw": "{type: adamw, lr: 3.0e-3, betas: [0.9, 0.95], weight_decay: 0.1,\n"
             "            warmup_steps: 20, decay: cosine, min_lr: 3.0e-4}",
    "sgd": "{type: sgd, lr: 0.1, betas: [0.9, 0.95], weight_decay: 0.0,\n"
           "            warmup_steps: 20, decay: cosine, min_lr: 0.01}",
}


def spec_text(run_dir, corpus, parallel_extra, steps, seed=1234, optimizer="adamw"):
    return f"""name: bench-dp-sync
run_dir: {run_dir}
seed: {seed}
model: {MODEL}
data: {{type: text, path: {corpus}, val_fraction: 0.05}}
parallel: {{dp: 2{parallel_extra}}}
training: {{steps: {steps}, micro_batch_size: 8, global_batch_size: 16, grad_clip: 1.0,
           eval_every: {steps}, eval_batches: 16, threads: 1}}
optimizer: {OPTIMIZERS[optimizer]}
checkpoint: {{every_steps: 0}}
logging: {{every_steps: 1, tensorboard: false}}
runtime: {{comm_selftest: false}}
"""


def run(binary, corpus, mode, steps, seed=1234, optimizer="adamw"):
    extra, label = MODES[mode]
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "job.yaml")
        run_dir = os.path.join(d, "run")
        with open(spec, "w") as f:
            f.write(spec_text(run_dir, corpus, extra, steps, seed, optimizer))
        p = subprocess.run([binary, "train", spec], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"{mode}: trainctl train exited {p.returncode}\n{p.stdout}\n{p.stderr}")
        rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    val = [r["val_loss"] for r in rows if "val_loss" in r]
    total = sum(r["comm_bytes"] for r in rows)
    return {
        "mode": mode,
        "label": label,
        "steps": len(rows),
        "final_train_loss": rows[-1]["loss"],
        "val_loss": val[-1],
        "bytes_per_step": total / len(rows),
        "elapsed_s": rows[-1]["elapsed_s"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    ap.add_argument("--corpus", default="/work/shared/data/tinyshakespeare.txt")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--outer-lr", type=float, help="DiLoCo's outer_lr (default: the mode's)")
    ap.add_argument("--outer-momentum", type=float, help="DiLoCo's outer_momentum")
    ap.add_argument("--powersgd-rank", type=int, help="PowerSGD's rank (default 4)")
    ap.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="adamw",
                    help="adamw (default) or sgd: momentum SGD, PowerSGD's own setting")
    args = ap.parse_args()
    if args.outer_lr is not None or args.outer_momentum is not None:
        lr = 0.9 if args.outer_lr is None else args.outer_lr
        mu = 0.3 if args.outer_momentum is None else args.outer_momentum
        MODES["diloco8"] = (f", dp_sync: diloco, sync_every: 8, outer_lr: {lr}, outer_momentum: {mu}",
                            f"DiLoCo, H = 8 (outer_lr {lr}, Nesterov {mu})")
    if args.powersgd_rank is not None:
        r = args.powersgd_rank
        MODES["powersgd4"] = (f", grad_compression: powersgd, powersgd_rank: {r}", f"PowerSGD, rank {r}")
    if not os.path.isfile(args.corpus):
        print(f"skipped: no corpus at {args.corpus} (pass --corpus)")
        return 0
    results = []
    for mode in args.modes.split(","):
        r = run(args.trainctl, args.corpus, mode, args.steps, args.seed, args.optimizer)
        print(json.dumps(r), flush=True)
        results.append(r)
    print()
    base = next((r for r in results if r["mode"] == "allreduce"), None)
    # The bytes of everything but the matrices (biases, LayerNorm, alignment gaps) are the
    # same in every mode that sends them each step; PowerSGD's matrix bytes are its P and Q.
    for r in results:
        if base is None:
            r["matrix_bytes_per_step"] = None
        elif r["mode"].startswith("powersgd"):
            rest = base["bytes_per_step"] - MATRIX_BYTES_ALLREDUCE
            r["matrix_bytes_per_step"] = r["bytes_per_step"] - rest
        else:
            r["matrix_bytes_per_step"] = MATRIX_BYTES_ALLREDUCE * r["bytes_per_step"] / base["bytes_per_step"]
    print("| mode | val loss | Δ vs allreduce (nats) | bytes/step | fewer bytes | on the matrices |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in results:
        if base is None:
            delta, fewer, fewer_m = "", "", ""
        else:
            delta = f"{r['val_loss'] - base['val_loss']:+.4f}"
            fewer = f"{base['bytes_per_step'] / r['bytes_per_step']:.1f}×" if r["bytes_per_step"] else "∞"
            fewer_m = (f"{base['matrix_bytes_per_step'] / r['matrix_bytes_per_step']:.1f}×"
                       if r["matrix_bytes_per_step"] else "∞")
        print(f"| {r['label']} | {r['val_loss']:.4f} | {delta} | {r['bytes_per_step']:,.0f} | {fewer} | {fewer_m} |")
    if base is not None:
        print(json.dumps({"matrix_bytes_per_step": {r["mode"]: r["matrix_bytes_per_step"] for r in results}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
