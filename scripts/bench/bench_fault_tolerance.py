#!/usr/bin/python3
"""Time lost per failure: fault-tolerant replicas against today's restart from a checkpoint.

The same job (a small GPT on synthetic data, dp 3 x pp 2 = 6 workers, --steps steps, a
checkpoint every --ckpt-every steps) runs four ways: without fault tolerance, with and
without a failure (runtime.max_restarts: 1), and with runtime.fault_tolerance, with and
without a failure. The failure is SIGKILL of one worker (replica 1's last stage) once the
run has logged --kill-at steps. The script watches metrics.jsonl as it grows and reports,
per case, the median over --repeats runs of:
  wall_s            the run's wall-clock time;
  lost_s            wall_s minus the same mode's median without a failure;
  stall_s           the longest time between two new steps in metrics.jsonl (seconds
                    without progress; with fault tolerance the survivors keep logging);
  steps_repeated    steps trained twice: with a restart, those after the checkpoint it
                    resumed from; with fault tolerance, the steps voted down (at most the
                    one in flight per failure), read from the survivors' logs.
One JSON line per run, then a Markdown table. Not a timed test: compare the modes within
one run of this script, on one machine.

Usage: scripts/bench/bench_fault_tolerance.py [--trainctl build/trainctl] [--steps 600]
       [--kill-at 300] [--ckpt-every 100] [--repeats 3]
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def spec(run_dir, steps, ckpt_every, ft):
    runtime = "runtime:\n  comm_timeout_s: 60\n  max_restarts: 1\n"
    if ft:
        runtime += "  fault_tolerance: {enabled: true}\n"
    return (f"name: bench-ft\nrun_dir: {run_dir}\nseed: 5\n"
            "model: {type: gpt, vocab_size: 64, seq_len: 16, n_layer: 2, n_head: 2, d_model: 32}\n"
            "data: {type: synthetic}\nparallel: {dp: 3, pp: 2}\n"
            f"training: {{steps: {steps}, micro_batch_size: 2, global_batch_size: 12, "
            "threads: 1, eval_every: 0}\n"
            "optimizer: {type: adamw, lr: 3.0e-3, warmup_steps: 5}\n"
            f"checkpoint: {{every_steps: {ckpt_every}, keep_last: 2}}\n"
            "logging: {every_steps: 1}\n" + runtime)


def steps_in(path):
    try:
        with open(path) as f:
            return [json.loads(l)["step"] for l in f if l.strip().endswith("}")]
    except (OSError, ValueError):
        return []


def worker_pid(run_dir, rank):
    with open(os.path.join(run_dir, "logs", f"rank{rank}.log")) as f:
        text = f.read()
    return int(re.findall(r"worker started: pid (\d+)", text)[-1])


def one_run(trainctl, work, args, ft, kill, repeat):
    run_dir = os.path.join(
        work, f"run-{'ft' if ft else 'restart'}-{'kill' if kill else 'clean'}-{repeat}")
    job = run_dir + ".yaml"
    with open(job, "w") as f:
        f.write(spec(run_dir, args.steps, args.ckpt_every, ft))
    metrics = os.path.join(run_dir, "metrics.jsonl")
    start = time.monotonic()
    proc = subprocess.Popen([trainctl, "train", job, "--resume", "none", "--overwrite"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen, last_new, stall, killed_at, resumed_from = 0, None, 0.0, None, None
    while proc.poll() is None:
        steps = steps_in(metrics)
        now = time.monotonic()
        newest = steps[-1] if steps else 0
        if newest != seen:
            if last_new is not None and killed_at is not None:
                stall = max(stall, now - last_new)
            if killed_at is not None and resumed_from is None and newest < seen:
                resumed_from = newest - 1  # the restart dropped the lines after its checkpoint
            seen, last_new = newest, now
        if kill and killed_at is None and newest >= args.kill_at:
            os.kill(worker_pid(run_dir, 4), signal.SIGKILL)  # rank 4: replica 1, stage 1
            killed_at, last_new = newest, now
        time.sleep(0.01)
    wall = time.monotonic() - start
    err = proc.stderr.read()
    if proc.returncode != 0:
        sys.exit(f"trainctl failed ({proc.returncode}):\n{err[-3000:]}")
    repeated = 0
    if kill and not ft:
        repeated = killed_at - resumed_from if resumed_from is not None else killed_at
    if kill and ft:
        voted = set()
        for r in range(6):
            with open(os.path.join(run_dir, "logs", f"rank{r}.log")) as f:
                voted |= set(re.findall(r"step (\d+) voted down", f.read()))
        repeated = len(voted)
    return {"mode": "fault_tolerance" if ft else "restart", "failure": kill, "wall_s": wall,
            "stall_s": stall if kill else 0.0, "steps_repeated": repeated}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--kill-at", type=int, default=300)
    p.add_argument("--ckpt-every", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench-ft-") as work:
        for repeat in range(args.repeats):
            for ft in (False, True):
                for kill in (False, True):
                    r = one_run(args.trainctl, work, args, ft, kill, repeat)
                    print(json.dumps(r), flush=True)
                    rows.setdefault((r["mode"], kill), []).append(r)
    print(f"\n{args.steps} steps, failure after step {args.kill_at}, checkpoint every "
          f"{args.ckpt_every} steps; medians of {args.repeats} runs\n")
    print("| mode | failure | wall s | time lost s | seconds without progress | steps repeated |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for mode in ("restart", "fault_tolerance"):
        clean = statistics.median(r["wall_s"] for r in rows[(mode, False)])
        for kill in (False, True):
            rs = rows[(mode, kill)]
            wall = statistics.median(r["wall_s"] for r in rs)
            print(f"| {mode} | {'kill 1 worker' if kill else 'none'} | {wall:.2f} | "
                  f"{wall - clean if kill else 0:.2f} | "
                  f"{statistics.median(r['stall_s'] for r in rs):.2f} | "
                  f"{statistics.median(r['steps_repeated'] for r in rs):.0f} |")


if __name__ == "__main__":
    main()
