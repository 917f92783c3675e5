#!/usr/bin/python3
"""Context parallelism on this machine: trainctl cp=2 vs cp=1 at a long sequence.

At seq_len 8192 (a small GPT: L2/H4/C128, micro-batch 1, 1 thread per worker) it runs,
in one invocation, one worker (cp 1) and the same job with each sequence split over two
workers (cp 2, ring attention), and prints tokens/s of each, the cp 2 speed-up, and the
share of the ring's K/V traffic hidden behind attention compute: 1 - cp_ring_exposed_ms /
cp_ring_ms from metrics.jsonl (the time attention waited for the next block, over the
time the CP ring's thread spent exchanging, rank 0's, averaged over the steps). The ring
thread's time includes waiting for the neighbour to start its side of an exchange, so the
share is an upper bound on the hidden fraction of pure transfer time; the time the
compute thread waited as a share of the step (cp2_ring_wait_of_step) is the plain cost.
Also each run's mem_peak_mb (tensor memory per rank). One JSON line per case, medians of
--repeat rounds.

Usage: scripts/bench/bench_context_parallel.py [--trainctl build/trainctl] [--steps 6]
       [--seq 8192] [--repeat 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_spec(d, seq, cp, steps):
    spec = os.path.join(d, "job.yaml")
    with open(spec, "w") as f:
        f.write(f"""name: bench-cp
run_dir: {d}/run
model: {{vocab_size: 256, seq_len: {seq}, n_layer: 2, n_head: 4, d_model: 128}}
data: {{type: synthetic}}
parallel: {{cp: {cp}}}
training: {{steps: {steps}, micro_batch_size: 1, global_batch_size: 1, threads: 1}}
optimizer: {{lr: 1.0e-3}}
logging: {{every_steps: 1}}
runtime: {{comm_selftest: false, comm_timeout_s: 600}}
""")
    return spec


def run(binary, seq, cp, steps):
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([binary, "train", write_spec(d, seq, cp, steps)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stdout[-3000:])
            raise RuntimeError(f"trainctl cp={cp} failed")
        rows = [json.loads(l) for l in open(os.path.join(d, "run", "metrics.jsonl"))][1:]
    step_ms = statistics.median(r["step_ms"] for r in rows)
    out = {"tok_s": seq / (step_ms / 1e3), "step_ms": step_ms,
           "mem_peak_mb": max(rows[-1].get("mem_peak_mb_ranks", [rows[-1]["mem_peak_mb"]]))}
    if cp > 1:
        ring = sum(r["cp_ring_ms"] for r in rows)
        exposed = sum(r["cp_ring_exposed_ms"] for r in rows)
        out.update(ring_ms=ring / len(rows), exposed_ms=exposed / len(rows),
                   hidden=max(0.0, 1 - exposed / ring) if ring > 0 else 1.0,
                   wait_of_step=exposed / sum(r["step_ms"] for r in rows))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rounds = []
    for _ in range(args.repeat):
        one = run(args.trainctl, args.seq, 1, args.steps)
        two = run(args.trainctl, args.seq, 2, args.steps)
        rounds.append((one, two))
    med = lambda f: statistics.median(f(o, t) for o, t in rounds)  # noqa: E731
    line = {"case": f"seq{args.seq}-L2-C128",
            "cp1_tok_s": round(med(lambda o, t: o["tok_s"])),
            "cp2_tok_s": round(med(lambda o, t: t["tok_s"])),
            "cp2_speedup": round(med(lambda o, t: t["tok_s"] / o["tok_s"]), 3),
            "cp2_ring_ms_per_step": round(med(lambda o, t: t["ring_ms"]), 1),
            "cp2_ring_exposed_ms_per_step": round(med(lambda o, t: t["exposed_ms"]), 1),
            "cp2_ring_hidden": round(med(lambda o, t: t["hidden"]), 3),
            "cp2_ring_wait_of_step": round(med(lambda o, t: t["wait_of_step"]), 4),
            "cp1_mem_peak_mb": round(med(lambda o, t: o["mem_peak_mb"]), 1),
            "cp2_mem_peak_mb": round(med(lambda o, t: t["mem_peak_mb"]), 1)}
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
