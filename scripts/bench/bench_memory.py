#!/usr/bin/python3
"""Memory per rank: activation recomputation and ZeRO, measured against the plan.

At a sequence length where activations dominate (GPT L4/H4/C128, seq_len 1024, micro-batch
2, fp32, 1 thread per worker), runs in one invocation:
  - one worker with training.activation_checkpointing none | selective | full;
  - dp=2 with parallel.zero 0 | 1 | 2 | 3 (3: parameters sharded too, gathered per block).
For each: the measured tensor-memory peak per rank (metrics.jsonl mem_peak_mb_max), the
plan's estimate (`trainctl plan --json`, total and the activation part), the peak resident
set (mem_rss_peak_mb), tokens/s (median over steps after warm-up) and, for recomputation,
the activation memory saved and the slowdown against `none` in CPU seconds of the whole run
(robust to other load on a shared machine; start-up included, the same for every case); for ZeRO, the per-rank model
state (parameters + gradients + optimizer) against zero 0's. One JSON line per case, then
a table.

Usage: scripts/bench/bench_memory.py [--trainctl build/trainctl] [--steps 8] [--repeats 3]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = {"vocab_size": 256, "seq_len": 1024, "n_layer": 4, "n_head": 4, "d_model": 128}
MICRO_BATCH = 2


def spec_text(run_dir, dp, zero, recompute, steps):
    model = ", ".join(f"{k}: {v}" for k, v in MODEL.items())
    return f"""name: bench-memory
run_dir: {run_dir}
model: {{{model}}}
data: {{type: synthetic}}
parallel: {{dp: {dp}, zero: {zero}}}
training: {{steps: {steps}, micro_batch_size: {MICRO_BATCH}, global_batch_size: {MICRO_BATCH * dp}, threads: 1, activation_checkpointing: {recompute}}}
optimizer: {{lr: 1.0e-3, warmup_steps: 1}}
logging: {{every_steps: 1}}
"""


def run(binary, dp, zero, recompute, steps):
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "job.yaml")
        with open(spec, "w") as f:
            f.write(spec_text(os.path.join(d, "run"), dp, zero, recompute, steps))
        check = subprocess.run([binary, "validate", spec], capture_output=True, text=True)
        if check.returncode != 0:
            return {"dp": dp, "zero": zero, "recompute": recompute,
                    "refused": check.stderr.strip().splitlines()[0]}
        plan = json.loads(subprocess.run([binary, "plan", spec, "--json"], check=True,
                                         capture_output=True, text=True).stdout)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([binary, "train", spec], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        rows = [json.loads(l) for l in open(os.path.join(d, "run", "metrics.jsonl"))]
    steady = rows[2:]  # skip warm-up steps (first-touch page faults, thread start)
    est = plan["memory_mb"][0]
    return {"dp": dp, "zero": zero, "recompute": recompute,
            "mem_peak_mb_max": rows[-1]["mem_peak_mb_max"],
            "plan_total_mb": max(r["total"] for r in plan["memory_mb"]),
            "plan_activations_mb": est["activations"],
            "plan_model_state_mb": est["parameters"] + est["gradients"] + est["optimizer"],
            "mem_rss_peak_mb": rows[-1]["mem_rss_peak_mb"],
            "tokens_per_s": statistics.median(r["tokens_per_s"] for r in steady),
            # CPU seconds of the launcher and its workers (reaped children): robust to other
            # load on a shared machine, unlike wall-clock tokens/s.
            "cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)}


def best_of(binary, dp, zero, recompute, steps, repeats):
    runs = [run(binary, dp, zero, recompute, steps) for _ in range(repeats)]
    if "refused" in runs[0]:
        return runs[0]
    out = runs[0]
    out["tokens_per_s"] = statistics.median(r["tokens_per_s"] for r in runs)
    out["cpu_s"] = statistics.median(r["cpu_s"] for r in runs)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    results = []
    for recompute in ("none", "selective", "full"):
        results.append(best_of(args.trainctl, 1, 0, recompute, args.steps, args.repeats))
        print(json.dumps(results[-1]), flush=True)
    for zero in (0, 1, 2, 3):
        results.append(best_of(args.trainctl, 2, zero, "none", args.steps, args.repeats))
        print(json.dumps(results[-1]), flush=True)

    base = results[0]
    print("\ncase              peak MiB/rank  plan MiB  activations  saved   model state  tokens/s  "
          "CPU s  slowdown  RSS MiB")
    zero0 = results[3]
    for r in results:
        name = f"dp={r['dp']} " + (f"zero {r['zero']}" if r["dp"] > 1 else r["recompute"])
        if "refused" in r:
            print(f"{name:<17} refused: {r['refused']}")
            continue
        saved = 1 - r["plan_activations_mb"] / base["plan_activations_mb"] if r["dp"] == 1 else None
        state = r["plan_model_state_mb"] / zero0["plan_model_state_mb"] if r["dp"] > 1 else None
        # Slowdown in CPU time (the same work on a loaded machine costs the same CPU time).
        slow = r["cpu_s"] / base["cpu_s"] - 1 if r["dp"] == 1 else None
        print(f"{name:<17} {r['mem_peak_mb_max']:>13.1f} {r['plan_total_mb']:>9.1f} "
              f"{r['plan_activations_mb']:>12.1f} {'' if saved is None else f'{saved:.0%}':>6} "
              f"{r['plan_model_state_mb']:>8.1f}{'' if state is None else f' ({state:.2f}x)':>8} "
              f"{r['tokens_per_s']:>9.0f} {r['cpu_s']:>6.1f} {'' if slow is None else f'{slow:+.1%}':>9} "
              f"{r['mem_rss_peak_mb']:>8.1f}")


if __name__ == "__main__":
    main()
