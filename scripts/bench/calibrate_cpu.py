#!/usr/bin/python3
"""Calibrates configs/clusters/this-machine-cpu.yaml from this machine's measured rates and
checks `trainctl plan --cluster` against trainctl's own measured step time.

Measures OpenBLAS sgemm (1024^3, one thread) and copy bandwidth with bench_ops, and the
shared-memory allreduce between two workers with `trainctl bench comm` (bus bandwidth of
the largest message, latency of the smallest); writes the cluster file (one "node" of
--workers CPU workers, fp32, matmul_efficiency 1 because the sgemm rate is measured); then
trains a small GPT for several layouts (one thread per worker) and prints predicted vs
measured step time (median after warm-up) as a Markdown table for docs/benchmarks.md.

Usage: scripts/bench/calibrate_cpu.py [--trainctl build/trainctl]
           [--bench-ops build/scripts/bench/bench_ops] [--steps 8] [--no-write]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER = os.path.join(ROOT, "configs", "clusters", "this-machine-cpu.yaml")
MODEL = {"vocab_size": 256, "seq_len": 256, "n_layer": 4, "n_head": 4, "d_model": 256}
LAYOUTS = [  # (dp, tp, pp, schedule)
    (1, 1, 1, "1f1b"), (2, 1, 1, "1f1b"), (1, 2, 1, "1f1b"), (1, 1, 2, "1f1b")]
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")


def measure_compute(bench_ops):
    out = subprocess.run([bench_ops, "--threads", "1", "--min-ms", "300"], check=True,
                         capture_output=True, text=True, env=ENV).stdout
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    sgemm = next(r for r in rows if r["op"] == "sgemm_ceiling")["gflops"]
    copy = next(r for r in rows if r["op"] == "copy_bandwidth")
    return sgemm, copy["gbps"]


def measure_comm(trainctl, workers):
    out = subprocess.run([trainctl, "bench", "comm", "--world", str(workers), "--min-bytes", "4K",
                          "--max-bytes", "16M", "--iters", "10"], check=True,
                         capture_output=True, text=True, env=ENV).stdout
    rows = []
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0] == "allreduce":
            rows.append((int(f[1]), float(f[4]), float(f[6])))  # bytes, us, busbw GB/s
    smallest, largest = rows[0], rows[-1]
    return largest[2], smallest[1] / (2 * (workers - 1))


def write_cluster(sgemm, copy_gbs, bus_gbs, latency_us, workers):
    text = f"""# This machine's CPU, calibrated by scripts/bench/calibrate_cpu.py (see
# docs/benchmarks.md): one "GPU" = one trainctl worker with one compute thread.
name: this-machine-cpu
device:
  name: cpu-1-thread
  peak_tflops: {sgemm / 1000:.5f}     # measured OpenBLAS sgemm 1024^3, one thread
  memory_bandwidth_gbs: {copy_gbs:.2f}  # measured copy bandwidth, one thread
  memory_gb: 16
  matmul_efficiency: 1.0   # the peak above is already a measured sgemm rate
  memory_efficiency: 1.0
node:
  gpus: {workers}
links:
  # measured shared-memory allreduce between {workers} workers (trainctl bench comm)
  intra_node: {{name: shm, bandwidth_gbs: {bus_gbs:.3f}, latency_us: {latency_us:.1f}}}
precision:
  activation_bytes: 4
  gradient_bytes: 4
overlap:
  dp: 1.0
"""
    with open(CLUSTER, "w") as f:
        f.write(text)


def train_step_ms(trainctl, d, dp, tp, pp, schedule, steps):
    spec = os.path.join(d, f"job_{dp}{tp}{pp}.yaml")
    m = MODEL
    with open(spec, "w") as f:
        f.write(f"""name: cal{dp}{tp}{pp}
run_dir: {d}/run{dp}{tp}{pp}
model: {{vocab_size: {m['vocab_size']}, seq_len: {m['seq_len']}, n_layer: {m['n_layer']}, n_head: {m['n_head']}, d_model: {m['d_model']}}}
data: {{type: synthetic}}
parallel: {{dp: {dp}, tp: {tp}, pp: {pp}, schedule: {schedule}}}
training: {{steps: {steps}, micro_batch_size: 4, global_batch_size: {8 * dp}, threads: 1}}
logging: {{every_steps: 1}}
runtime: {{comm_selftest: false}}
""")
    subprocess.run([trainctl, "train", spec, "--resume", "none", "--overwrite"], check=True, env=ENV,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = [json.loads(l) for l in open(os.path.join(d, f"run{dp}{tp}{pp}", "metrics.jsonl"))]
    times = [r["step_ms"] for r in rows if "step_ms" in r][2:]
    plan = subprocess.run([trainctl, "plan", spec, "--cluster", CLUSTER, "--json"], check=True,
                          capture_output=True, text=True).stdout
    return statistics.median(times), json.loads(plan)["cost"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--trainctl", default=os.path.join(ROOT, "build", "trainctl"))
    p.add_argument("--bench-ops", default=os.path.join(ROOT, "build", "scripts", "bench", "bench_ops"))
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--no-write", action="store_true")
    a = p.parse_args()
    if not a.no_write:
        sgemm, copy_gbs = measure_compute(a.bench_ops)
        bus, lat = measure_comm(a.trainctl, a.workers)
        print(json.dumps({"sgemm_gflops": sgemm, "copy_gbs": copy_gbs, "allreduce_busbw_gbs": bus,
                          "latency_us": lat}))
        write_cluster(sgemm, copy_gbs, bus, lat, a.workers)
    print("| layout | measured step ms | predicted step ms | error |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as d:
        for dp, tp, pp, schedule in LAYOUTS:
            measured, cost = train_step_ms(a.trainctl, d, dp, tp, pp, schedule, a.steps)
            predicted = cost["step_seconds"] * 1e3
            print(f"| dp {dp} tp {tp} pp {pp} | {measured:.1f} | {predicted:.1f} | "
                  f"{100 * (predicted - measured) / measured:+.1f}% |", flush=True)


if __name__ == "__main__":
    main()
