#!/usr/bin/python3
"""Sequence parallelism vs plain tensor parallelism, side by side in one run.

For each case (GPT L4/H4/C256, micro-batch 4, tp 2, seq_len 256 and 1024; with
activation_checkpointing none and selective) it trains the same job twice, with
`parallel.sequence_parallel` false and true, profiling two steps (logging.profile_steps),
and reports per TP rank and step:
  - tp_bytes: bytes each rank sends in the TP group's collectives on a ring (allreduce
    2 (t-1)/t of its buffer, reduce-scatter (t-1)/t of its input, all-gather (t-1) times
    its block), from the trace's communicator events (group tp[...], op, bytes);
  - tp_calls and tp_ms: how many TP collectives ran and the time spent in them (median
    over the profiled steps of the sum over calls, rank 0);
  - step_ms: median step time (steps after the first two) and tokens_per_s;
  - mem_peak_mb: each rank's tensor memory peak (metrics.jsonl), and the memory plan's
    activations for rank 0 (`trainctl plan --json`).
One JSON line per run, then a table with the sp/tp ratios.

Usage: scripts/bench/bench_sequence_parallel.py [--trainctl build/trainctl] [--steps 8]
       [--quick] [--repeat 1]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TP_OPS = {"allreduce", "reduce_scatter", "allgather"}


def write_spec(d, case, sp, steps):
    spec = os.path.join(d, "job.yaml")
    with open(spec, "w") as f:
        f.write(f"""name: bench-sp
run_dir: {d}/run
model: {{vocab_size: 512, seq_len: {case['T']}, n_layer: 4, n_head: 4, d_model: 256}}
data: {{type: synthetic}}
parallel: {{tp: {case['tp']}, sequence_parallel: {str(sp).lower()}}}
training: {{steps: {steps}, micro_batch_size: {case['B']}, global_batch_size: {case['B']},
           threads: 1, activation_checkpointing: {case['recompute']}}}
optimizer: {{lr: 1.0e-3}}
logging: {{every_steps: 1, profile_steps: [{steps - 1}, {steps}]}}
runtime: {{comm_selftest: false}}
""")
    return spec


def wire_bytes(op, nbytes, t):
    if op == "allreduce":
        return 2 * (t - 1) / t * nbytes
    if op == "reduce_scatter":
        return (t - 1) / t * nbytes  # the trace records the whole input
    return (t - 1) * nbytes  # allgather: the trace records this rank's block


def tp_comm(trace_path, t):
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    per_step = {}
    for e in events:
        a = e.get("args", {})
        if e.get("pid") != 0 or e.get("name") not in TP_OPS:
            continue
        if not str(a.get("group", "")).startswith("tp"):
            continue
        s = per_step.setdefault(a["step"], {"bytes": 0.0, "ms": 0.0, "calls": 0})
        s["bytes"] += wire_bytes(e["name"], a["bytes"], t)
        s["ms"] += e["dur"] / 1e3
        s["calls"] += 1
    steps = sorted(per_step.values(), key=lambda s: s["ms"])
    return {"tp_bytes": statistics.median(s["bytes"] for s in steps),
            "tp_calls": statistics.median(s["calls"] for s in steps),
            "tp_ms": statistics.median(s["ms"] for s in steps)}


def run(binary, case, sp, steps):
    with tempfile.TemporaryDirectory() as d:
        spec = write_spec(d, case, sp, steps)
        plan = subprocess.run([binary, "plan", spec, "--json"], capture_output=True, text=True)
        if plan.returncode != 0:
            sys.exit(plan.stdout + plan.stderr)
        planned = json.loads(plan.stdout)["memory_mb"][0]
        r = subprocess.run([binary, "train", spec], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(r.stdout + r.stderr)
        rows = [json.loads(l) for l in open(os.path.join(d, "run", "metrics.jsonl"))]
        timed = rows[2:] if len(rows) > 3 else rows
        step_ms = statistics.median(x["step_ms"] for x in timed)
        out = {"case": case["name"], "sequence_parallel": sp, "step_ms": step_ms,
               "tokens_per_s": case["B"] * case["T"] / (step_ms / 1e3),
               "mem_peak_mb_ranks": rows[-1]["mem_peak_mb_ranks"],
               "plan_activations_mb": planned["activations"], "plan_total_mb": planned["total"]}
        out.update(tp_comm(os.path.join(d, "run", "trace.json"), case["tp"]))
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=1, help="runs per case; medians reported")
    ap.add_argument("--quick", action="store_true", help="seq_len 256 only, 4 steps")
    args = ap.parse_args()
    steps = 4 if args.quick else args.steps
    cases = []
    for T in ([256] if args.quick else [256, 1024]):
        for recompute in ["none", "selective"]:
            cases.append({"name": f"L4-C256-T{T}-B4-tp2-{recompute}", "T": T, "B": 4, "tp": 2,
                          "recompute": recompute})
    table = []
    for case in cases:
        pair = {}
        for sp in (False, True):
            runs = [run(args.trainctl, case, sp, steps) for _ in range(args.repeat)]
            res = dict(runs[0])
            for k in ("step_ms", "tokens_per_s", "tp_ms"):
                res[k] = statistics.median(x[k] for x in runs)
            print(json.dumps(res), flush=True)
            pair[sp] = res
        table.append((case["name"], pair[False], pair[True]))
    print()
    print(f"{'case':32} {'tp MB/step':>10} {'sp MB/step':>10} {'bytes':>6} "
          f"{'tp ms':>7} {'sp ms':>7} {'step':>6} {'mem tp':>7} {'mem sp':>7} {'mem':>6}")
    for name, a, b in table:
        ma, mb = max(a["mem_peak_mb_ranks"]), max(b["mem_peak_mb_ranks"])
        print(f"{name:32} {a['tp_bytes'] / 1e6:10.2f} {b['tp_bytes'] / 1e6:10.2f} "
              f"{b['tp_bytes'] / a['tp_bytes']:6.3f} {a['step_ms']:7.1f} {b['step_ms']:7.1f} "
              f"{b['step_ms'] / a['step_ms']:6.3f} {ma:7.1f} {mb:7.1f} {mb / ma:6.3f}")


if __name__ == "__main__":
    main()
