#!/usr/bin/python3
"""Memory of the mixed-precision layout (issue 35, parallel/mixed_params.h), measured.

Two jobs, each at dp 1 (zero 0), dp 2 and dp 4 (zero 1), and a pipeline, in fp32 and in
bf16, side by side in one invocation:
  - model-state heavy: GPT L16/H4/C256, vocab 256, one 16-token sequence per rank;
  - activation heavy:  GPT L4/H4/C128, vocab 256, seq_len 1024, micro-batch 2;
  - pipeline: GPT L8/H4/C128 at seq_len 512, pp 4 interleaved (2 chunks), 8 micro-batches
    of 1 (stage 0 holds 11 (chunk, micro-batch) pairs; its outputs leave through the
    staging pools, parallel/boundary_staging.h).
For each: the measured tensor-memory peak per rank (metrics.jsonl mem_peak_mb_max), the
plan's total and its model state (parameters + gradients + master weights + optimizer, from
`trainctl plan --json`), bytes of model state per parameter, and tokens/s (median over the
logged steps after the first). bf16 keeps 16-bit weights, fp32 gradients and fp32 master
weights (18 bytes a parameter, 6 + 12/dp under ZeRO-1; fp32: 16, 8 + 8/dp), and keeps the
activations for backward in 16-bit stores with one fp32 working set (model/activation_arena.h):
the plan's `activations` column (what the micro-batches in flight keep) shows that part.
One JSON line per case, then a markdown table (docs/benchmarks.md).

Usage: scripts/bench/bench_mixed_precision.py [--trainctl build/trainctl] [--steps 6]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL_STATE = {"vocab_size": 256, "seq_len": 16, "n_layer": 16, "n_head": 4, "d_model": 256}
ACTIVATIONS = {"vocab_size": 256, "seq_len": 1024, "n_layer": 4, "n_head": 4, "d_model": 128}
PIPELINE = {"vocab_size": 256, "seq_len": 512, "n_layer": 8, "n_head": 4, "d_model": 128}
# (job, model, micro-batch, parallel section, global batch)
CASES = [
    ("model-state heavy", MODEL_STATE, 1, "dp: 1", 1),
    ("model-state heavy", MODEL_STATE, 1, "dp: 2, zero: 1", 2),
    ("model-state heavy", MODEL_STATE, 1, "dp: 4, zero: 1", 4),
    ("activation heavy", ACTIVATIONS, 2, "dp: 1", 2),
    ("activation heavy", ACTIVATIONS, 2, "dp: 2, zero: 1", 4),
    ("activation heavy", ACTIVATIONS, 2, "dp: 4, zero: 1", 8),
    ("pipeline", PIPELINE, 1, "pp: 4, schedule: interleaved, virtual_stages: 2", 8),
]


def spec_text(run_dir, model, micro_batch, parallel, global_batch, compute, steps):
    fields = ", ".join(f"{k}: {v}" for k, v in model.items())
    return f"""name: bench-mixed
run_dir: {run_dir}
model: {{{fields}}}
data: {{type: synthetic}}
parallel: {{{parallel}}}
precision: {{compute: {compute}}}
training: {{steps: {steps}, micro_batch_size: {micro_batch}, global_batch_size: {global_batch}, threads: 1}}
optimizer: {{lr: 1.0e-3, warmup_steps: 1}}
logging: {{every_steps: 1}}
"""


def run(binary, model, micro_batch, parallel, global_batch, compute, steps):
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "job.yaml")
        with open(spec, "w") as f:
            f.write(spec_text(os.path.join(d, "run"), model, micro_batch, parallel, global_batch,
                              compute, steps))
        plan = subprocess.run([binary, "plan", spec, "--json"], capture_output=True, text=True,
                              check=True)
        planned = json.loads(plan.stdout)["memory_mb"][0]
        subprocess.run([binary, "train", spec], capture_output=True, text=True, check=True)
        with open(os.path.join(d, "run", "metrics.jsonl")) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    state = sum(planned[k] for k in ("parameters", "gradients", "master_weights", "optimizer"))
    return {
        "mem_peak_mb": rows[-1]["mem_peak_mb_max"],
        "plan_total_mb": planned["total"],
        "plan_state_mb": state,
        "activations_mb": planned["activations"],
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in rows[1:]),
    }


def param_count(binary, model):
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "job.yaml")
        with open(spec, "w") as f:
            f.write(spec_text(os.path.join(d, "run"), model, 1, "dp: 1", 1, "fp32", 1))
        out = subprocess.run([binary, "plan", spec], capture_output=True, text=True,
                             check=True).stdout
    for line in out.splitlines():
        if line.startswith("parameters:"):
            return int(line.split()[1])
    raise RuntimeError("plan printed no parameter count")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    ap.add_argument("--steps", type=int, default=6)
    args = ap.parse_args()
    table = []
    for job, model, micro_batch, parallel, global_batch in CASES:
        params = param_count(args.trainctl, model)
        case = {}
        for compute in ("fp32", "bf16"):
            r = run(args.trainctl, model, micro_batch, parallel, global_batch, compute, args.steps)
            # Per parameter where rank 0 holds them all (not under pp).
            whole = "pp:" not in parallel
            r["state_bytes_per_param"] = r["plan_state_mb"] * 2**20 / params if whole else None
            print(json.dumps({"job": job, "parallel": parallel, "compute": compute, **r}),
                  flush=True)
            case[compute] = r
        table.append((job, parallel, case))
    print()
    print("| job | parallel | model state B/param fp32 → bf16 | kept activations MB fp32 → bf16 "
          "| mem_peak_mb fp32 | bf16 | bf16 / fp32 | tokens/s fp32 | bf16 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for job, parallel, c in table:
        f, b = c["fp32"], c["bf16"]
        state = (f"{f['state_bytes_per_param']:.1f} → {b['state_bytes_per_param']:.1f}"
                 if f["state_bytes_per_param"] else "—")
        print(f"| {job} | {parallel} | {state} | {f['activations_mb']:.1f} → "
              f"{b['activations_mb']:.1f} | {f['mem_peak_mb']:.1f} | {b['mem_peak_mb']:.1f} "
              f"| {b['mem_peak_mb'] / f['mem_peak_mb']:.2f} | {f['tokens_per_s']:.0f} | "
              f"{b['tokens_per_s']:.0f} |")


if __name__ == "__main__":
    main()
