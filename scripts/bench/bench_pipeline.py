#!/usr/bin/python3
"""Pipeline parallelism on this machine: measured bubble vs theory, and speed vs one worker.

Runs, in one invocation, a GPT whose stages are balanced (pp=2: 8 blocks, small
vocabulary, so the LM head adds little to the last stage) with micro-batches m in
{2, 4, 8}:
  - trainctl, one worker with 1 thread (the same global batch, accumulation m);
  - trainctl, pp=2 with 1 thread per stage, for each schedule (gpipe, 1f1b).
For the pipeline runs it reports the measured bubble (metrics.jsonl pipeline_bubble:
the stages' time waiting for each other as a share of the step, median over steps after
warm-up) next to the theoretical (p-1)/(m+p-1), and tokens/s with the speed-up over one
worker. One JSON line per case, then a table; `trainctl plan` output for one layout.

Usage: scripts/bench/bench_pipeline.py [--trainctl build/trainctl] [--steps 12]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = {"vocab_size": 64, "seq_len": 128, "n_layer": 8, "n_head": 4, "d_model": 128}
MICRO_BATCH = 4


def spec_text(run_dir, pp, schedule, m, steps):
    model = ", ".join(f"{k}: {v}" for k, v in MODEL.items())
    return f"""name: bench-pp
run_dir: {run_dir}
model: {{{model}}}
data: {{type: synthetic}}
parallel: {{dp: 1, tp: 1, pp: {pp}, schedule: {schedule}}}
training: {{steps: {steps}, micro_batch_size: {MICRO_BATCH}, global_batch_size: {MICRO_BATCH * m}, threads: 1}}
optimizer: {{lr: 1.0e-3, warmup_steps: 1}}
logging: {{every_steps: 1}}
"""


def run(binary, pp, schedule, m, steps):
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "job.yaml")
        with open(spec, "w") as f:
            f.write(spec_text(os.path.join(d, "run"), pp, schedule, m, steps))
        subprocess.run([binary, "train", spec], check=True, stdout=subprocess.DEVNULL)
        rows = [json.loads(l) for l in open(os.path.join(d, "run", "metrics.jsonl"))]
        plan = None
        if pp > 1 and schedule == "1f1b" and m == 8:
            plan = subprocess.run([binary, "plan", spec], check=True, capture_output=True,
                                  text=True).stdout
    steady = rows[2:]  # skip warm-up steps (first-touch page faults, thread start)
    out = {"pp": pp, "schedule": schedule, "micro_batches": m,
           "tokens_per_s": statistics.median(r["tokens_per_s"] for r in steady),
           "step_ms": statistics.median(r["step_ms"] for r in steady)}
    if pp > 1:
        out["bubble_measured"] = statistics.median(r["pipeline_bubble"] for r in steady)
        out["bubble_theory"] = (pp - 1) / (m + pp - 1)
        out["idle_ms_per_stage"] = [statistics.median(r["pipeline_idle_ms"][s] for r in steady)
                                    for s in range(pp)]
    return out, plan


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    ap.add_argument("--steps", type=int, default=12)
    args = ap.parse_args()
    results, plan_text = [], None
    for m in (2, 4, 8):
        base, _ = run(args.trainctl, 1, "1f1b", m, args.steps)
        print(json.dumps(base), flush=True)
        for schedule in ("gpipe", "1f1b"):
            r, plan = run(args.trainctl, 2, schedule, m, args.steps)
            r["speedup"] = r["tokens_per_s"] / base["tokens_per_s"]
            print(json.dumps(r), flush=True)
            results.append(r)
            plan_text = plan or plan_text
    print("\nschedule  m  bubble measured  theory  |diff|  tokens/s  speed-up vs 1 worker")
    for r in results:
        print(f"{r['schedule']:8} {r['micro_batches']:2}  {100 * r['bubble_measured']:14.1f}% "
              f"{100 * r['bubble_theory']:6.1f}% {100 * abs(r['bubble_measured'] - r['bubble_theory']):6.1f}% "
              f"{r['tokens_per_s']:9.0f}  {r['speedup']:.2f}x")
    if plan_text:
        print("\n$ trainctl plan (pp 2, 1f1b, 8 micro-batches)\n" + plan_text)


if __name__ == "__main__":
    main()
