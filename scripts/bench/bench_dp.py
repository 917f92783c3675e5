#!/usr/bin/python3
"""Data-parallel scaling on this machine: trainctl DP=2 vs one worker vs PyTorch DDP.

For each GPT shape of the compute-core benchmark (L4/H4/C256/T256 and L6/H6/C384/T256,
micro-batch 8 per worker) it runs, in one invocation:
  - trainctl, one worker with 1 thread;
  - trainctl, DP=2 with 1 thread per worker (global batch 16);
  - PyTorch 1 process with 1 thread, and PyTorch DDP (gloo) 2 processes x 1 thread.
It also runs two independent one-worker jobs at once: the most two processes can get
from this machine (shared memory bandwidth and caches), the ceiling for DP=2.
It prints tokens/s, the DP=2 speed-up and scaling efficiency, and for trainctl the
gradient communication time and how much of it was hidden behind the backward pass
(from metrics.jsonl: comm_ms and exposed_comm_ms, minima over the DP ranks: what the rank
that finished its backward last waited for) and the longest wait of any rank
(dp_wait_max_ms: also the faster rank waiting for the slower one). One JSON line per case,
then a table.

Usage: scripts/bench/bench_dp.py [--trainctl build/trainctl] [--steps 20] [--quick] [--repeat 3]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_train import ROOT, SHAPES, TORCH_CHILD, VOCAB  # noqa: E402

DDP_CHILD = TORCH_CHILD.replace(
    "m = GPT(); opt =",
    "import torch.distributed as dist\n"
    "dist.init_process_group('gloo')\n"
    "torch.manual_seed(0)\n"
    "m = torch.nn.parallel.DistributedDataParallel(GPT()); opt =")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_spec(d, shape, dp, steps):
    spec = os.path.join(d, "job.yaml")
    with open(spec, "w") as f:
        f.write(f"""name: bench-dp
run_dir: {d}/run
model: {{vocab_size: {VOCAB}, seq_len: {shape['T']}, n_layer: {shape['L']}, n_head: {shape['H']}, d_model: {shape['C']}}}
data: {{type: synthetic}}
parallel: {{dp: {dp}}}
training: {{steps: {steps}, micro_batch_size: {shape['B']}, global_batch_size: {shape['B'] * dp}, threads: 1}}
optimizer: {{lr: 1.0e-3}}
logging: {{every_steps: 1}}
runtime: {{comm_selftest: false}}
""")
    return spec


def summarize(d, shape, dp):
    rows = [json.loads(l) for l in open(os.path.join(d, "run", "metrics.jsonl"))][2:]
    step_ms = statistics.median(r["step_ms"] for r in rows)
    out = {"tok_s": shape["B"] * dp * shape["T"] / (step_ms / 1e3), "step_ms": step_ms}
    if dp > 1:
        comm = sum(r["comm_ms"] for r in rows)
        exposed = sum(r["exposed_comm_ms"] for r in rows)
        wait = sum(r["dp_wait_max_ms"] for r in rows)
        out.update(comm_ms=comm / len(rows), exposed_ms=exposed / len(rows),
                   wait_max_ms=wait / len(rows),
                   hidden=1 - exposed / comm if comm > 0 else 1.0)
    return out


def trainctl_run(binary, shape, dp, steps, copies=1):
    """`copies` independent jobs at once (2: the machine's ceiling for two workers that
    never communicate); returns the first job's summary with tok_s summed over copies."""
    dirs = [tempfile.TemporaryDirectory() for _ in range(copies)]
    try:
        procs = [subprocess.Popen([binary, "train", write_spec(d.name, shape, dp, steps)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for d in dirs]
        for p in procs:
            if p.wait() != 0:
                raise RuntimeError("trainctl run failed")
        outs = [summarize(d.name, shape, dp) for d in dirs]
    finally:
        for d in dirs:
            d.cleanup()
    out = outs[0]
    out["tok_s"] = sum(o["tok_s"] for o in outs)
    return out


def torch_run(shape, world, steps):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world))
    code = TORCH_CHILD if world == 1 else DDP_CHILD
    procs = [subprocess.Popen(["/usr/bin/python3", "-c", code, json.dumps(shape), str(steps),
                               str(VOCAB)], env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) for r in range(world)]
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError("PyTorch run failed")
    return world * json.loads(outs[0].strip().splitlines()[-1])["tokens_per_s"]


def measure(args, shape, name):
    """One round: one worker, two independent workers, DP=2, PyTorch 1 process and DDP."""
    one = trainctl_run(args.trainctl, shape, 1, args.steps)
    pair = trainctl_run(args.trainctl, shape, 1, args.steps, copies=2)
    two = trainctl_run(args.trainctl, shape, 2, args.steps)
    t1 = torch_run(shape, 1, args.steps)
    t2 = torch_run(shape, 2, args.steps)
    return {"case": name, "trainctl_1w_tok_s": round(one["tok_s"]),
            "trainctl_dp2_tok_s": round(two["tok_s"]),
            "trainctl_speedup": round(two["tok_s"] / one["tok_s"], 3),
            "two_independent_speedup": round(pair["tok_s"] / one["tok_s"], 3),
            "dp2_vs_independent": round(two["tok_s"] / pair["tok_s"], 3),
            "trainctl_comm_ms": round(two["comm_ms"], 1),
            "trainctl_exposed_comm_ms": round(two["exposed_ms"], 1),
            "trainctl_comm_hidden": round(two["hidden"], 3),
            "trainctl_dp_wait_max_ms": round(two["wait_max_ms"], 1),
            "torch_1p_tok_s": round(t1), "torch_ddp2_tok_s": round(t2),
            "torch_speedup": round(t2 / t1, 3)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="first shape only")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds per shape; the table shows each column's median")
    args = ap.parse_args()
    rows = []
    for shape in SHAPES[:1] if args.quick else SHAPES:
        name = "L{L}/H{H}/C{C}/T{T}/B{B}".format(**shape)
        rounds = []
        for _ in range(args.repeat):
            rounds.append(measure(args, shape, name))
            print(json.dumps(rounds[-1]), flush=True)
        rows.append({k: name if k == "case" else statistics.median(r[k] for r in rounds)
                     for k in rounds[0]})
    print()
    print("ceiling = two independent one-worker jobs at once (no communication): what two\n"
          "processes get from this machine; DP=2 / ceiling is the cost of data parallelism.")
    if args.repeat > 1:
        print(f"each column: the median of {args.repeat} rounds")
    print(f"{'model':<20}{'trainctl 1w':>12}{'DP=2':>8}{'speedup':>9}{'ceiling':>9}{'DP/ceil':>9}"
          f"{'comm ms':>9}{'hidden':>8}{'wait ms':>9}{'torch 1p':>10}{'DDP 2':>8}{'speedup':>9}")
    for r in rows:
        print(f"{r['case']:<20}{r['trainctl_1w_tok_s']:>12.0f}{r['trainctl_dp2_tok_s']:>8.0f}"
              f"{r['trainctl_speedup']:>9.2f}{r['two_independent_speedup']:>9.2f}"
              f"{r['dp2_vs_independent']:>9.1%}"
              f"{r['trainctl_comm_ms']:>9.1f}{r['trainctl_comm_hidden']:>8.1%}"
              f"{r['trainctl_dp_wait_max_ms']:>9.1f}"
              f"{r['torch_1p_tok_s']:>10.0f}{r['torch_ddp2_tok_s']:>8.0f}{r['torch_speedup']:>9.2f}")


if __name__ == "__main__":
    sys.exit(main())
