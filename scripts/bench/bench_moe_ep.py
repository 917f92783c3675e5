#!/usr/bin/python3
"""Expert parallelism on this machine: an MoE model at dp=2, ep=2 vs ep=1.

Both runs train the same Mixtral-style model (llama + MoE, 8 experts, top 2) with the same
global batch on 2 workers. ep=1: every worker holds all 8 experts and computes its own
tokens; ep=2: each holds 4 experts, and every MoE layer sends the rows for the other
worker's experts there and their outputs back (four all-to-alls per layer and micro-batch:
dispatch and combine, forward and backward).

For each case it prints tokens/s (median over --repeat runs, first steps skipped) and, for
ep=2, the all-to-all time per step from the profiled steps' trace (`alltoallv` events,
summed per rank, the minimum over ranks) and its share of the step. How much is hidden: none
of it in this build. The exchange runs on the training thread and blocks it (the experts
need the rows, the combine needs the outputs), so all of it is exposed; the table shows it
as `a2a share`, and `step +ms` (ep2 - ep1 step time) how much the step grew net of the
smaller expert work per rank. The DP gradient reduction's own hiding (comm_ms, exposed_comm_ms) is printed for both.
One JSON line per case, then a table.

Usage: scripts/bench/bench_moe_ep.py [--trainctl build/trainctl] [--steps 12] [--repeat 3]
       [--quick]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SHAPES = {
    "L4/C256/E8/T256": dict(L=4, H=4, C=256, T=256, B=4, E=8, K=2, F=512),
    "L2/C128/E8/T128": dict(L=2, H=4, C=128, T=128, B=4, E=8, K=2, F=256),
}


def write_spec(d, shape, ep, steps):
    spec = os.path.join(d, "job.yaml")
    first, last = max(1, steps - 3), steps
    with open(spec, "w") as f:
        f.write(f"""name: bench-moe-ep
run_dir: {d}/run
model: {{type: llama, vocab_size: 256, seq_len: {shape['T']}, n_layer: {shape['L']}, n_head: {shape['H']}, d_model: {shape['C']}, ffn_hidden: {shape['F']}, moe: {{num_experts: {shape['E']}, top_k: {shape['K']}, expert_ffn_hidden: {shape['F']}}}}}
data: {{type: synthetic}}
parallel: {{dp: 2, ep: {ep}}}
training: {{steps: {steps}, micro_batch_size: {shape['B']}, global_batch_size: {2 * shape['B']}, threads: 1}}
optimizer: {{lr: 1.0e-3}}
logging: {{every_steps: 1, profile_steps: [{first}, {last}]}}
runtime: {{comm_selftest: false}}
""")
    return spec, last - first + 1


def alltoall_ms_per_step(trace_file, profiled_steps):
    """Sum of `alltoallv` durations per rank (ms), the minimum over ranks, per step."""
    with open(trace_file) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    per_rank = {}
    for e in events:
        if e.get("name") == "alltoallv" and e.get("ph") == "X":
            per_rank[e["pid"]] = per_rank.get(e["pid"], 0.0) + e.get("dur", 0) / 1000.0
    if not per_rank:
        return 0.0
    return min(per_rank.values()) / profiled_steps


def run_once(binary, shape, ep, steps):
    with tempfile.TemporaryDirectory() as d:
        spec, profiled = write_spec(d, shape, ep, steps)
        r = subprocess.run([binary, "train", spec], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stdout[-3000:])
            raise RuntimeError("trainctl run failed")
        rows = [json.loads(l) for l in open(os.path.join(d, "run", "metrics.jsonl"))]
        # Skip the first steps (warm-up) and the profiled ones (tracing costs a little).
        steady = [x for x in rows[2:] if x["step"] < steps - profiled + 1] or rows[2:]
        step_ms = statistics.median(x["step_ms"] for x in steady)
        tok_s = statistics.median(x["tokens_per_s"] for x in steady)
        comm = statistics.median(x.get("comm_ms", 0) for x in steady)
        exposed = statistics.median(x.get("exposed_comm_ms", 0) for x in steady)
        a2a = alltoall_ms_per_step(os.path.join(d, "run", "trace.json"), profiled) if ep > 1 else 0.0
        return dict(step_ms=step_ms, tok_s=tok_s, comm_ms=comm, exposed_ms=exposed, a2a_ms=a2a)


def measure(args, name, shape):
    out = {"case": name}
    for ep in (1, 2):
        runs = [run_once(args.trainctl, shape, ep, args.steps) for _ in range(args.repeat)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        out[f"ep{ep}_tok_s"] = round(med["tok_s"])
        out[f"ep{ep}_step_ms"] = round(med["step_ms"], 1)
        out[f"ep{ep}_dp_comm_ms"] = round(med["comm_ms"], 1)
        out[f"ep{ep}_dp_exposed_comm_ms"] = round(med["exposed_ms"], 1)
        if ep == 2:
            out["ep2_alltoall_ms"] = round(med["a2a_ms"], 1)
            out["ep2_a2a_share"] = round(med["a2a_ms"] / med["step_ms"], 3)
    out["ep2_vs_ep1"] = round(out["ep2_tok_s"] / out["ep1_tok_s"], 3)
    out["ep2_step_delta_ms"] = round(out["ep2_step_ms"] - out["ep1_step_ms"], 1)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="the small shape only, one run")
    args = ap.parse_args()
    shapes = SHAPES
    if args.quick:
        shapes = {k: v for k, v in SHAPES.items() if k.startswith("L2")}
        args.repeat = 1
    results = []
    for name, shape in shapes.items():
        r = measure(args, name, shape)
        print(json.dumps(r), flush=True)
        results.append(r)
    print(f"{'model':<18}{'ep1 tok/s':>10}{'ep2 tok/s':>10}{'ep2/ep1':>9}{'a2a ms':>8}"
          f"{'a2a share':>10}{'step +ms':>9}{'dp comm ep1/ep2':>17}")
    for r in results:
        print(f"{r['case']:<18}{r['ep1_tok_s']:>10}{r['ep2_tok_s']:>10}{r['ep2_vs_ep1']:>9.2f}"
              f"{r['ep2_alltoall_ms']:>8.1f}{r['ep2_a2a_share']:>10.1%}"
              f"{r['ep2_step_delta_ms']:>9.1f}"
              f"{r['ep1_dp_comm_ms']:>8.1f}/{r['ep2_dp_comm_ms']:<8.1f}")


if __name__ == "__main__":
    main()
