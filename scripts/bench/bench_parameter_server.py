#!/usr/bin/python3
"""Parameter servers against synchronous allreduce, on real text (issue 18 part 5).

Two questions, one JSON line per run, then Markdown tables:

1. Loss: a byte-level GPT on tinyshakespeare, dp = 2, the same seed, data and token budget
   as scripts/bench/bench_dp_sync.py (global batch 16 x 64 tokens, --steps steps, AdamW with
   warm-up and cosine decay). Final validation loss of synchronous allreduce, parameter
   servers with max_staleness 0 (synchronous: must match allreduce) and with
   max_staleness 2 (target: within 0.08 nats), S = 2 servers; and max_staleness 2 with
   worker 1 slowed 3x, where asynchrony really happens (no target: how much quality the
   speed of part 2 costs).
2. Heterogeneous workers: worker 1 slowed 3x with the test hook TRAINCTL_TEST_SLOWDOWN=1:3
   (it sleeps twice its compute time each step). Synchronous DP runs at the slow worker's
   pace; parameter servers let the fast worker keep computing within the staleness bound.
   Throughput = the run's tokens (the same budget) / its wall time (metrics.jsonl's
   elapsed_s). Target: parameter servers >= 1.5x synchronous DP's throughput. The runs of a
   row go one after the other on the same machine, so a busy machine slows both.

Usage: scripts/bench/bench_parameter_server.py [--trainctl build/trainctl] [--steps 400]
       [--speed-steps 120] [--corpus /work/shared/data/tinyshakespeare.txt]
       [--parts loss,speed] [--staleness 2] [--optimizer adamw|sgd]
Skips (exit 0, a message) when the corpus is absent.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dp_sync import OPTIMIZERS  # noqa: E402  the same two optimizers, one definition

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
V, T, L, C = 256, 64, 2, 128
GLOBAL_BATCH = 16
MODEL = f"{{vocab_size: {V}, seq_len: {T}, n_layer: {L}, n_head: 4, d_model: {C}}}"


def parallel_of(mode, servers, staleness):
    if mode == "allreduce":
        return "{dp: 2}"
    return (f"{{dp: 2, mode: parameter_server, parameter_server: "
            f"{{servers: {servers}, max_staleness: {staleness}}}}}")


def spec_text(run_dir, corpus, parallel, steps, optimizer="adamw"):
    return f"""name: bench-ps
run_dir: {run_dir}
seed: 1234
model: {MODEL}
data: {{type: text, path: {corpus}, val_fraction: 0.05}}
parallel: {parallel}
training: {{steps: {steps}, micro_batch_size: 8, global_batch_size: {GLOBAL_BATCH}, grad_clip: 1.0,
           eval_every: {steps}, eval_batches: 16, threads: 1}}
optimizer: {OPTIMIZERS[optimizer]}
checkpoint: {{every_steps: 0}}
logging: {{every_steps: 1, tensorboard: false}}
runtime: {{comm_selftest: false}}
"""


def run(binary, corpus, label, parallel, steps, env_extra=None, optimizer="adamw"):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINCTL_")}
    env.update(env_extra or {})
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "job.yaml")
        run_dir = os.path.join(d, "run")
        with open(spec, "w") as f:
            f.write(spec_text(run_dir, corpus, parallel, steps, optimizer))
        p = subprocess.run([binary, "train", spec], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise SystemExit(f"{label}: trainctl train exited {p.returncode}\n{p.stdout}\n{p.stderr}")
        rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    val = [r["val_loss"] for r in rows if "val_loss" in r]
    stale_hist = []
    for r in rows:
        for i, n in enumerate(r.get("ps_staleness", [])):
            stale_hist += [0] * (i + 1 - len(stale_hist))
            stale_hist[i] += n
    elapsed = rows[-1]["elapsed_s"]
    return {
        "run": label,
        "steps": rows[-1]["step"],
        "val_loss": val[-1] if val else None,
        "elapsed_s": elapsed,
        "tokens_per_s": rows[-1]["step"] * GLOBAL_BATCH * T / elapsed,
        "staleness_histogram": stale_hist,
    }


SLOW = {"TRAINCTL_TEST_SLOWDOWN": "1:3"}


def run_all(args, runs, steps):
    """Runs (mode, label, max_staleness, extra environment) one after the other."""
    results = []
    for mode, label, k, env in runs:
        r = run(args.trainctl, args.corpus, label, parallel_of(mode, args.servers, k), steps, env,
                args.optimizer)
        print(json.dumps(r), flush=True)
        results.append(r)
    print()
    return results


def histogram(r):
    return ", ".join(str(n) for n in r["staleness_histogram"]) or "—"


def loss_part(args):
    k = args.staleness
    results = run_all(args, [("allreduce", "allreduce (synchronous)", 0, None),
                             ("ps", "parameter servers, max_staleness 0", 0, None),
                             ("ps", f"parameter servers, max_staleness {k}", k, None),
                             ("ps", f"parameter servers, max_staleness {k}, worker 1 slowed 3x", k, SLOW)],
                      args.steps)
    base = results[0]["val_loss"]
    print(f"| run ({args.steps} steps, S = {args.servers}) | val loss | Δ vs allreduce (nats) | staleness histogram |")
    print("| --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['run']} | {r['val_loss']:.4f} | {r['val_loss'] - base:+.4f} | {histogram(r)} |")
    print()


def speed_part(args):
    k = args.staleness
    results = run_all(args, [("allreduce", "allreduce, equal workers", 0, None),
                             ("allreduce", "allreduce, worker 1 slowed 3x", 0, SLOW),
                             ("ps", f"parameter servers K = {k}, worker 1 slowed 3x", k, SLOW),
                             ("ps", f"parameter servers K = {2 * k}, worker 1 slowed 3x", 2 * k, SLOW)],
                      args.speed_steps)
    base = results[1]["tokens_per_s"]
    print(f"| run ({args.speed_steps} steps) | wall s | tokens/s | vs synchronous with the slow worker | staleness histogram |")
    print("| --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['run']} | {r['elapsed_s']:.1f} | {r['tokens_per_s']:,.0f} | "
              f"{r['tokens_per_s'] / base:.2f}× | {histogram(r)} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    ap.add_argument("--corpus", default="/work/shared/data/tinyshakespeare.txt")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--speed-steps", type=int, default=120)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--staleness", type=int, default=2)
    ap.add_argument("--parts", default="loss,speed")
    ap.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="adamw",
                    help="adamw (default) or sgd: momentum SGD (as bench_dp_sync.py --optimizer)")
    args = ap.parse_args()
    if not os.path.isfile(args.corpus):
        print(f"skipped: no corpus at {args.corpus} (pass --corpus)")
        return 0
    parts = args.parts.split(",")
    if "loss" in parts:
        loss_part(args)
    if "speed" in parts:
        speed_part(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
