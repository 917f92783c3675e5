#!/usr/bin/python3
"""Pipeline schedules on this machine: measured bubble vs theory, step time, memory.

Runs, in one invocation, a GPT whose stages are balanced (8 blocks, small vocabulary, so
the LM head adds little to the last stage; d_model 512 by default, so that as in real
models the matrix products dominate each block and W, the weight-gradient half of the
backward, is about as long as B: --d-model 128 shows a model whose attention and
elementwise backward, which stay in B, make W short), one worker thread per stage, with m
micro-batches per step (default m in {4, 8}; pp = 2 on a 2-core machine, --pp 4 where
there are 4 cores: stages sharing a core hide the bubble):
  - trainctl, one worker with 1 thread (the same global batch, accumulation m);
  - trainctl, pp stages, for each schedule: gpipe, 1f1b, interleaved (virtual_stages 2),
    zb1p (zero-bubble H1: backward split into B and W, Ws fill the cool-down), zbv
    (ZB-V: two chunks per stage in V order, virtual_stages 2).
For each pipeline run it reports:
  - bubble_trace: the idle share measured from the timeline trace (--profile over the
    steps after warm-up): per step, 1 - (the stages' forward/backward/B/W time) /
    (pp x the span from the step's first pipeline instruction to its last compute op on
    any stage), median over the profiled steps;
  - bubble_metrics: metrics.jsonl's pipeline_bubble (time the stages spend in receives and
    send waits, over pp x step time), median;
  - bubble_theory: the schedule's (parallel/pipeline_schedule.h theoretical_bubble);
  - compute_ms_per_stage: the stages' forward/backward/B/W time per step, from the trace;
  - step_ms, tokens/s and the speed-up over one worker (medians after warm-up);
  - the memory: each stage's peak micro-batches held (trainctl plan --json: the memory
    plan's activations) and each rank's measured peak tensor memory (mem_peak_mb_ranks).
One JSON line per case, then a table; `trainctl plan` output of zb1p for one layout.
Then, in the same invocation, scripts/bench/bench_stage_balance.py (parallel.stage_balance
auto against the equal split on a 32k-vocabulary GPT, pp 2), unless --no-stage-balance.

Usage: scripts/bench/bench_pipeline.py [--trainctl build/trainctl] [--steps 10] [--pp 2]
                                       [--micro-batches 4 8] [--repeats 3] [--d-model 512]
                                       [--schedules 1f1b zb1p zbv] [--no-stage-balance]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = {"vocab_size": 64, "seq_len": 128, "n_layer": 8, "n_head": 8, "d_model": 512}
MICRO_BATCH = 4
WARMUP_STEPS = 3  # first-touch page faults, thread start
SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb1p", "zbv")
COMPUTE = {"forward", "backward", "backward_input", "backward_weight"}


def spec_text(run_dir, pp, schedule, m, steps):
    model = ", ".join(f"{k}: {v}" for k, v in MODEL.items())
    chunks = ", virtual_stages: 2" if schedule in ("interleaved", "zbv") else ""
    profile = f", profile_steps: [{WARMUP_STEPS + 1}, {steps}]" if pp > 1 else ""
    return f"""name: bench-pp
run_dir: {run_dir}
model: {{{model}}}
data: {{type: synthetic}}
parallel: {{dp: 1, tp: 1, pp: {pp}, schedule: {schedule}{chunks}}}
training: {{steps: {steps}, micro_batch_size: {MICRO_BATCH}, global_batch_size: {MICRO_BATCH * m}, threads: 1}}
optimizer: {{lr: 1.0e-3, warmup_steps: 1}}
logging: {{every_steps: 1{profile}}}
"""


def trace_bubble(trace_path, pp):
    """Median over the profiled steps of the idle share of the pipeline's compute span."""
    events = json.load(open(trace_path))["traceEvents"]
    steps = {}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "pipeline":
            continue
        step = steps.setdefault(e["args"]["step"], {"start": None, "end": None, "busy": 0.0})
        start, end = e["ts"], e["ts"] + e["dur"]
        step["start"] = start if step["start"] is None else min(step["start"], start)
        if e["name"] in COMPUTE:
            step["busy"] += e["dur"]
            step["end"] = end if step["end"] is None else max(step["end"], end)
    done = [s for s in steps.values() if s["end"] is not None]
    shares = [1.0 - s["busy"] / (pp * (s["end"] - s["start"])) for s in done]
    # The stages' compute time per step (ms, mean over stages): what the schedule costs
    # besides its bubble (zb1p's B and W copy the operands W needs).
    busy_ms = statistics.median(s["busy"] / pp / 1000.0 for s in done)
    return statistics.median(shares), busy_ms


def theory(pp, schedule, m):
    if schedule == "interleaved":
        return (pp - 1) / (2 * m + pp - 1)
    if schedule == "zb1p":
        return (pp - 1) / (3 * m + pp - 1)
    if schedule == "zbv":
        return 1 - 6 * m / max(6 * m + pp - 1, 4 * m + 4 * pp - 2)
    return (pp - 1) / (m + pp - 1)


def run(binary, pp, schedule, m, steps, want_plan_text):
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "job.yaml")
        with open(spec, "w") as f:
            f.write(spec_text(os.path.join(d, "run"), pp, schedule, m, steps))
        subprocess.run([binary, "train", spec], check=True, stdout=subprocess.DEVNULL)
        rows = [json.loads(l) for l in open(os.path.join(d, "run", "metrics.jsonl"))]
        steady = rows[WARMUP_STEPS:]
        out = {"pp": pp, "schedule": schedule, "micro_batches": m,
               "tokens_per_s": statistics.median(r["tokens_per_s"] for r in steady),
               "step_ms": statistics.median(r["step_ms"] for r in steady),
               "mem_peak_mb_ranks": rows[-1]["mem_peak_mb_ranks"]}
        plan_text = None
        if pp > 1:
            out["bubble_trace"], out["compute_ms_per_stage"] = trace_bubble(
                os.path.join(d, "run", "trace.json"), pp)
            out["bubble_metrics"] = statistics.median(r["pipeline_bubble"] for r in steady)
            out["bubble_theory"] = theory(pp, schedule, m)
            plan = json.loads(subprocess.run([binary, "plan", spec, "--json"], check=True,
                                             capture_output=True, text=True).stdout)
            out["plan_bubble"] = plan["bubble"]
            out["plan_peak_activations"] = plan["peak_activations"]
            if want_plan_text:
                plan_text = subprocess.run([binary, "plan", spec], check=True,
                                           capture_output=True, text=True).stdout
    return out, plan_text


def median_case(runs):
    """One case's runs (several repeats) folded into medians."""
    out = dict(runs[0])
    for key in ("tokens_per_s", "step_ms", "bubble_trace", "bubble_metrics", "speedup",
                "compute_ms_per_stage"):
        if key in out:
            out[key] = statistics.median(r[key] for r in runs)
    out["repeats"] = len(runs)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--micro-batches", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--repeats", type=int, default=1,
                    help="rounds over every case, interleaved; the table shows medians")
    ap.add_argument("--d-model", type=int, default=MODEL["d_model"])
    ap.add_argument("--schedules", nargs="+", choices=SCHEDULES, default=list(SCHEDULES))
    ap.add_argument("--no-stage-balance", action="store_true",
                    help="skip bench_stage_balance.py (stage_balance auto vs equal)")
    args = ap.parse_args()
    MODEL["d_model"] = args.d_model
    MODEL["n_head"] = max(1, args.d_model // 64)
    runs, plan_text = {}, None
    for _ in range(args.repeats):
        for m in args.micro_batches:
            base, _ = run(args.trainctl, 1, "1f1b", m, args.steps, False)
            print(json.dumps(base), flush=True)
            for schedule in args.schedules:
                if schedule == "interleaved" and m % args.pp != 0:
                    continue
                want_text = plan_text is None and schedule == "zb1p" and m == args.micro_batches[-1]
                r, text = run(args.trainctl, args.pp, schedule, m, args.steps, want_text)
                r["speedup"] = r["tokens_per_s"] / base["tokens_per_s"]
                print(json.dumps(r), flush=True)
                runs.setdefault((m, schedule), []).append(r)
                plan_text = text or plan_text
    results = [median_case(v) for v in runs.values()]
    print(f"\nmedians of {args.repeats} round(s)")
    print("schedule     m  bubble: trace  metrics  theory  step_ms  compute_ms  tokens/s"
          "  vs 1 worker  peak mb held  peak MB/rank")
    for r in results:
        print(f"{r['schedule']:11} {r['micro_batches']:2}  {100 * r['bubble_trace']:12.1f}% "
              f"{100 * r['bubble_metrics']:7.1f}% {100 * r['bubble_theory']:6.1f}% "
              f"{r['step_ms']:8.1f} {r['compute_ms_per_stage']:11.1f} {r['tokens_per_s']:9.0f}  "
              f"{r['speedup']:10.2f}x  "
              f"{str(r['plan_peak_activations']):>12}  "
              f"{', '.join(f'{x:.1f}' for x in r['mem_peak_mb_ranks'])}")
    for m in args.micro_batches:
        by = {r["schedule"]: r for r in results if r["micro_batches"] == m}
        if "zb1p" in by and "1f1b" in by:
            ratio = by["zb1p"]["bubble_trace"] / by["1f1b"]["bubble_trace"]
            print(f"m={m}: zb1p's measured bubble is {ratio:.2f} of 1f1b's "
                  f"(target <= 0.5; theory {by['zb1p']['bubble_theory'] / by['1f1b']['bubble_theory']:.2f})")
    if plan_text:
        print(f"\n$ trainctl plan (pp {args.pp}, zb1p, {args.micro_batches[-1]} micro-batches)\n"
              + plan_text)
    if not args.no_stage_balance:
        print("\n$ scripts/bench/bench_stage_balance.py (stage_balance: auto vs equal)", flush=True)
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bench", "bench_stage_balance.py"),
                        "--trainctl", args.trainctl], check=True)


if __name__ == "__main__":
    main()
