#!/usr/bin/python3
"""Pipeline stage balance: parallel.stage_balance equal vs auto on a large-vocabulary GPT.

A 6-layer GPT with a 32k vocabulary on 2 pipeline stages (1f1b, 2 workers, 1 thread each):
the LM head and loss cost about as much as five blocks, so equal stages (3 + 3 blocks) leave
the last stage the slowest and the first one waiting; stage_balance: auto gives the head's
stage fewer blocks. Both run side by side in one invocation, alternating, `--repeat` times
each; explicit layers_per_stage splits can be added with --split. Prints one JSON line per
case (median step_ms over the repeats' medians, tokens/s, the split `trainctl plan` reports,
the measured pipeline bubble) and a table with the speed-up over equal.

Usage: scripts/bench/bench_stage_balance.py [--trainctl build/trainctl] [--steps 12]
           [--repeat 3] [--split 4,2] [--split 5,1] [--quick]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The head's products (vocab x d_model per token) are ~5 blocks' (12 d_model^2 + attention).
MODEL = {"vocab_size": 32768, "seq_len": 64, "n_layer": 6, "n_head": 8, "d_model": 512}
MICRO_BATCH, MICRO_BATCHES = 2, 8


def write_spec(d, parallel_extra, steps):
    spec = os.path.join(d, "job.yaml")
    model = ", ".join(f"{k}: {v}" for k, v in MODEL.items())
    with open(spec, "w") as f:
        f.write(f"""name: bench-stage-balance
run_dir: {d}/run
model: {{{model}}}
data: {{type: synthetic}}
parallel: {{pp: 2, schedule: 1f1b{parallel_extra}}}
training: {{steps: {steps}, micro_batch_size: {MICRO_BATCH}, global_batch_size: {MICRO_BATCH * MICRO_BATCHES}, threads: 1}}
optimizer: {{lr: 1.0e-3}}
logging: {{every_steps: 1}}
runtime: {{comm_selftest: false}}
""")
    return spec


def planned_split(binary, spec):
    """The stage lines `trainctl plan` prints, e.g. ['0-3 (4)', '4-5 (2)']."""
    out = subprocess.run([binary, "plan", spec], check=True, capture_output=True, text=True).stdout
    return [m.group(1) for m in re.finditer(r"^ stage \d+: (?:embedding, )?(blocks? [^,;]+)", out,
                                            re.MULTILINE)]


def run_once(binary, parallel_extra, steps):
    with tempfile.TemporaryDirectory() as d:
        spec = write_spec(d, parallel_extra, steps)
        split = planned_split(binary, spec)
        r = subprocess.run([binary, "train", spec], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"trainctl train failed ({parallel_extra}):\n{r.stdout}\n{r.stderr}")
        rows = [json.loads(line) for line in open(os.path.join(d, "run", "metrics.jsonl"))]
        rows = rows[2:]  # warm-up steps
        return {"split": split,
                "step_ms": statistics.median(r["step_ms"] for r in rows),
                "bubble": statistics.median(r.get("pipeline_bubble", 0.0) for r in rows)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--split", action="append", default=[],
                    help="also run parallel.layers_per_stage: [A, B] (given as A,B)")
    ap.add_argument("--quick", action="store_true", help="6 steps, 1 repeat")
    args = ap.parse_args()
    if args.quick:
        args.steps, args.repeat = 6, 1
    cases = [("equal", ", stage_balance: equal"), ("auto", ", stage_balance: auto")]
    cases += [(f"layers_per_stage [{s}]", f", layers_per_stage: [{s}]") for s in args.split]
    runs = {name: [] for name, _ in cases}
    for _ in range(args.repeat):  # alternate, so drifts of the machine hit every case alike
        for name, extra in cases:
            runs[name].append(run_once(args.trainctl, extra, args.steps))
    results = {}
    for name, _ in cases:
        step_ms = statistics.median(r["step_ms"] for r in runs[name])
        tokens = MICRO_BATCH * MICRO_BATCHES * MODEL["seq_len"]
        results[name] = {"case": name, "split": runs[name][0]["split"],
                         "step_ms": round(step_ms, 2),
                         "tokens_per_s": round(tokens / (step_ms / 1e3), 1),
                         "pipeline_bubble": round(statistics.median(
                             r["bubble"] for r in runs[name]), 4),
                         "runs_step_ms": [round(r["step_ms"], 2) for r in runs[name]],
                         "model": MODEL, "pp": 2, "micro_batches": MICRO_BATCHES}
        print(json.dumps(results[name]), flush=True)
    base = results["equal"]["step_ms"]
    print(f"\n{'case':<26} {'split (blocks per stage)':<34} {'step ms':>9} {'tokens/s':>10} "
          f"{'bubble':>7} {'vs equal':>9}")
    for r in results.values():
        print(f"{r['case']:<26} {' | '.join(r['split']):<34} {r['step_ms']:>9.1f} "
              f"{r['tokens_per_s']:>10.0f} {r['pipeline_bubble']:>7.3f} "
              f"{base / r['step_ms']:>8.2f}x")


if __name__ == "__main__":
    main()
